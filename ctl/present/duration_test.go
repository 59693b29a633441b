package present

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{Duration(0), "-"},
		{Duration(-time.Second), "-"},
		{Duration(1400 * time.Millisecond), "1s"},
		{Duration(184 * time.Second), "3m4s"},
		{Duration(3723 * time.Second), "1h2m3s"},
		{ETA(0), "-"},
		{ETA(5.6), "6s"},
		{ETA(184), "3m4s"},
		{Took(100, 100), "0s"},
		{Took(100, 284), "3m4s"},
		{Elapsed(1234567 * time.Microsecond), "1.235s"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
