package heatmap

import "testing"

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{614400, "600 KiB"},
		{20 << 20, "20 MiB"},
		{3.1 * (1 << 30), "3.1 GiB"},
	}
	for _, tt := range tests {
		if got := FormatBytes(tt.in); got != tt.want {
			t.Errorf("FormatBytes(%g): got %q, want %q", tt.in, got, tt.want)
		}
	}
}
