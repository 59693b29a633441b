package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/proto"
)

// PrintJSON writes v as indented JSON: protobuf messages with their proto field names,
// every field present and 64-bit integers as numbers (a stable shape for scripts: fields are
// only ever added), anything else with encoding/json.
func PrintJSON(w io.Writer, v any) error {
	if m, ok := v.(proto.Message); ok {
		v = protoValue(m.ProtoReflect())
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// Table prints aligned columns on a terminal and tab-separated lines when piped.
type Table struct {
	w    io.Writer
	tty  bool
	rows [][]string
}

// NewTable starts a table with the given header.
func NewTable(ios *IOStreams, header ...string) *Table {
	return &Table{w: ios.Out, tty: ios.OutTTY, rows: [][]string{header}}
}

// Row adds one row; values are formatted with %v.
func (t *Table) Row(cells ...any) {
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, r)
}

// Render writes the table.
func (t *Table) Render() error {
	if !t.tty {
		for _, r := range t.rows {
			if _, err := fmt.Fprintln(t.w, strings.Join(r, "\t")); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
