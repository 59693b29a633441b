package replica

import (
	"errors"
	"testing"
)

func TestParseQuorum(t *testing.T) {
	tests := []struct {
		name            string
		ack, from       string
		n               int
		wantAck, wantFr int
		wantErr         error
	}{
		{"defaults n=3", "", "", 3, 2, 3, nil},
		{"defaults n=1", "", "", 1, 1, 1, nil},
		{"defaults n=2", "", "", 2, 2, 2, nil},
		{"defaults n=5", "", "", 5, 3, 5, nil},
		{"from only", "", "2", 3, 2, 2, nil},
		{"from=1", "", "1", 3, 1, 1, nil},
		{"ack only", "1", "", 3, 1, 3, nil},
		{"ack only too big", "3", "", 2, 0, 0, ErrInvalidArgument},
		{"both", "1", "1", 3, 1, 1, nil},
		{"ack=from=n", "3", "3", 3, 3, 3, nil},
		{"ack > from", "3", "2", 3, 0, 0, ErrInvalidArgument},
		{"from > n", "1", "4", 3, 0, 0, ErrInvalidArgument},
		{"ack zero", "0", "3", 3, 0, 0, ErrInvalidArgument},
		{"from zero", "1", "0", 3, 0, 0, ErrInvalidArgument},
		{"ack negative", "-1", "3", 3, 0, 0, ErrInvalidArgument},
		{"from negative", "1", "-2", 3, 0, 0, ErrInvalidArgument},
		{"ack not a number", "x", "3", 3, 0, 0, ErrInvalidArgument},
		{"from not a number", "1", "3x", 3, 0, 0, ErrInvalidArgument},
		{"ack float", "1.0", "3", 3, 0, 0, ErrInvalidArgument},
		{"ack plus sign", "+1", "3", 3, 1, 3, nil},
		{"ack overflow", "99999999999999999999", "3", 3, 0, 0, ErrInvalidArgument},
		{"ack space", " 1", "3", 3, 0, 0, ErrInvalidArgument},
		{"no ring", "", "", 0, 0, 0, ErrNotAdmitted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ack, from, err := ParseQuorum(tt.ack, tt.from, tt.n)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParseQuorum(%q, %q, %d) error = %v, want %v", tt.ack, tt.from, tt.n, err, tt.wantErr)
			}
			if ack != tt.wantAck || from != tt.wantFr {
				t.Errorf("ParseQuorum(%q, %q, %d) = %d, %d, want %d, %d", tt.ack, tt.from, tt.n, ack, from, tt.wantAck, tt.wantFr)
			}
		})
	}
}

func TestQuorum(t *testing.T) {
	tests := []struct {
		ack, from, n    int
		wantAck, wantFr int
		wantErr         error
	}{
		{0, 0, 3, 2, 3, nil},
		{0, 0, 1, 1, 1, nil},
		{0, 0, 4, 3, 4, nil},
		{0, 2, 3, 2, 2, nil},
		{1, 0, 3, 1, 3, nil},
		{2, 3, 3, 2, 3, nil},
		{-1, 3, 3, 0, 0, ErrInvalidArgument},
		{1, -1, 3, 0, 0, ErrInvalidArgument},
		{3, 2, 3, 0, 0, ErrInvalidArgument},
		{1, 4, 3, 0, 0, ErrInvalidArgument},
		{1, 1, 0, 0, 0, ErrNotAdmitted},
	}
	for _, tt := range tests {
		ack, from, err := Quorum(tt.ack, tt.from, tt.n)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("Quorum(%d, %d, %d) error = %v, want %v", tt.ack, tt.from, tt.n, err, tt.wantErr)
			continue
		}
		if ack != tt.wantAck || from != tt.wantFr {
			t.Errorf("Quorum(%d, %d, %d) = %d, %d, want %d, %d", tt.ack, tt.from, tt.n, ack, from, tt.wantAck, tt.wantFr)
		}
	}
}

// Every error is one line: the HTTP API sends it as the 400 reason.
func TestParseQuorumErrorIsOneLine(t *testing.T) {
	for _, in := range [][2]string{{"x", ""}, {"", "x"}, {"3", "2"}, {"1", "9"}, {"0", ""}} {
		_, _, err := ParseQuorum(in[0], in[1], 3)
		if err == nil {
			t.Fatalf("ParseQuorum(%q, %q, 3) = nil error", in[0], in[1])
		}
		for _, r := range err.Error() {
			if r == '\n' {
				t.Errorf("ParseQuorum(%q, %q, 3) error %q spans lines", in[0], in[1], err)
			}
		}
	}
}
