package cli

import (
	"fmt"
	"strconv"
	"strings"

	"ringkv/ctl/present"
)

// ParseRate parses a throttle in MB/s: "50", "2.5", "50MB/s", "512KB/s", "1G", "0" (unthrottled).
// It returns bytes per second.
func ParseRate(s string) (uint64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "/S")
	t = strings.TrimSuffix(t, "B")
	t = strings.TrimSuffix(t, "I")
	mult := float64(present.MiB)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			t = t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v > 1e6 {
		return 0, fmt.Errorf("rate %q: want MB/s, e.g. 50, 2.5 or 512KB/s", s)
	}
	return uint64(v * mult), nil
}
