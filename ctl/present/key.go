package present

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// KeyWidth is the most characters a key takes in a table unless revealed.
const KeyWidth = 40

// Key renders a key for an operator: a short printable key as it is; a long or binary one
// cut, with "~" and a short hash of the whole key (its ring token) so two cut keys stay
// apart. With reveal, the whole key (quoted when not printable; a key the node kept only the
// first bytes of says how long it is). Values are never rendered.
func Key(key []byte, fullLen int, token uint64, reveal bool) string {
	short := fmt.Sprintf("~%08x", token>>32)
	printable := utf8.Valid(key)
	for _, r := range string(key) {
		printable = printable && strconv.IsPrint(r)
	}
	if reveal {
		s := string(key)
		if !printable {
			s = strconv.Quote(s)
		}
		if fullLen > len(key) {
			s += fmt.Sprintf("… (first %d of %d bytes)", len(key), fullLen)
		}
		return s
	}
	if printable && fullLen == len(key) && utf8.RuneCount(key) <= KeyWidth {
		return string(key)
	}
	if printable {
		r := []rune(string(key))
		return string(r[:min(len(r), KeyWidth-len(short)-1)]) + "…" + short
	}
	n := min(len(key), (KeyWidth-len(short)-3)/2)
	return fmt.Sprintf("0x%x…%s", key[:n], short)
}
