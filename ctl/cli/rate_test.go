package cli

import (
	"testing"

	"ringkv/ctl/present"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{"50", 50 * present.MiB, false},
		{"2.5", 5 * present.MiB / 2, false},
		{"50MB/s", 50 * present.MiB, false},
		{"50mib/s", 50 * present.MiB, false},
		{"512KB/s", 512 << 10, false},
		{"1G", 1 << 30, false},
		{"0", 0, false},
		{"", 0, true},
		{"-1", 0, true},
		{"fast", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseRate(%q): got %d, %v, want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
