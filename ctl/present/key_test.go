package present

import (
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	long := strings.Repeat("a", 100)
	for _, tc := range []struct {
		name   string
		key    []byte
		full   int
		reveal bool
		want   string
	}{
		{"short", []byte("user:42"), 7, false, "user:42"},
		{"long", []byte(long), 100, false, strings.Repeat("a", 30) + "…~12345678"},
		{"binary", []byte{0, 1, 0xff}, 3, false, "0x0001ff…~12345678"},
		{"revealed long", []byte(long), 100, true, long},
		{"revealed binary", []byte{0, 'a'}, 2, true, `"\x00a"`},
		{"kept prefix", []byte("abc"), 300, true, "abc… (first 3 of 300 bytes)"},
		{"cut by the node", []byte("abc"), 300, false, "abc…~12345678"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Key(tc.key, tc.full, 0x12345678_9abcdef0, tc.reveal); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
