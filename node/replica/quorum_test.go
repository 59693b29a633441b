package replica

import (
	"errors"
	"strings"
	"testing"
)

func TestParseQuorum(t *testing.T) {
	tests := []struct {
		name            string
		ack, from       string
		wantAck, wantFr int
		wantErr         error
	}{
		{"defaults", "", "", 0, 0, nil},
		{"from only", "", "2", 0, 2, nil},
		{"ack only", "1", "", 1, 0, nil},
		{"both", "3", "2", 3, 2, nil}, // ack > from is Quorum's to refuse
		{"ack zero", "0", "3", 0, 0, ErrInvalidArgument},
		{"from zero", "1", "0", 0, 0, ErrInvalidArgument},
		{"ack negative", "-1", "3", 0, 0, ErrInvalidArgument},
		{"from negative", "1", "-2", 0, 0, ErrInvalidArgument},
		{"ack not a number", "x", "3", 0, 0, ErrInvalidArgument},
		{"from not a number", "1", "3x", 0, 0, ErrInvalidArgument},
		{"ack float", "1.0", "3", 0, 0, ErrInvalidArgument},
		{"ack plus sign", "+1", "3", 1, 3, nil},
		{"ack overflow", "99999999999999999999", "3", 0, 0, ErrInvalidArgument},
		{"ack space", " 1", "3", 0, 0, ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ack, from, err := ParseQuorum(tt.ack, tt.from)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParseQuorum(%q, %q) error = %v, want %v", tt.ack, tt.from, err, tt.wantErr)
			}
			if ack != tt.wantAck || from != tt.wantFr {
				t.Errorf("ParseQuorum(%q, %q) = %d, %d, want %d, %d", tt.ack, tt.from, ack, from, tt.wantAck, tt.wantFr)
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
		{0, 0, 2, 2, 2, nil},
		{0, 0, 5, 3, 5, nil},
		{0, 1, 3, 1, 1, nil},
		{3, 0, 2, 0, 0, ErrInvalidArgument},
		{3, 3, 3, 3, 3, nil},
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
func TestQuorumErrorIsOneLine(t *testing.T) {
	for _, in := range [][2]string{{"x", ""}, {"", "x"}, {"3", "2"}, {"1", "9"}, {"0", ""}} {
		ack, from, err := ParseQuorum(in[0], in[1])
		if err == nil {
			_, _, err = Quorum(ack, from, 3)
		}
		if err == nil {
			t.Fatalf("ack=%q from=%q of 3 replicas: got nil error, want one", in[0], in[1])
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("ack=%q from=%q: error %q spans lines", in[0], in[1], err)
		}
	}
}
