package tui

import (
	"io"
	"strconv"
)

func fmtInt(i int) string { return strconv.Itoa(i) }

func readAll(r io.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}
