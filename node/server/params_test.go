package server

import (
	"errors"
	"strings"
	"testing"

	"ringkv/node/replica"
)

func TestParseEntityQuery(t *testing.T) {
	long := strings.Repeat("k", 5000)
	tests := []struct {
		name      string
		query     string
		wantKey   string
		wantAck   int
		wantFrom  int
		wantError error
	}{
		{name: "defaults", query: "id=k", wantKey: "k"},
		{name: "explicit", query: "id=k&ack=1&from=2", wantKey: "k", wantAck: 1, wantFrom: 2},
		{name: "from only", query: "id=k&from=1", wantKey: "k", wantFrom: 1},
		{name: "ack only", query: "id=k&ack=3", wantKey: "k", wantAck: 3},
		{name: "escaped key", query: "id=a%20b%2Fc", wantKey: "a b/c"},
		// The key's size and the quorum's bounds are the Coordinator's to check, once.
		{name: "long key passed on", query: "id=" + long, wantKey: long},
		{name: "empty id passed on", query: "id=", wantKey: ""},
		{name: "ack over from passed on", query: "id=k&ack=3&from=2", wantKey: "k", wantAck: 3, wantFrom: 2},
		{name: "unknown params ignored", query: "id=k&x=y", wantKey: "k"},

		// Every 400 of the query's form.
		{name: "no query", query: "", wantError: replica.ErrInvalidArgument},
		{name: "missing id", query: "ack=1&from=1", wantError: replica.ErrInvalidArgument},
		{name: "two ids", query: "id=a&id=b", wantError: replica.ErrInvalidArgument},
		{name: "malformed escape", query: "id=%zz", wantError: replica.ErrInvalidArgument},
		{name: "empty ack", query: "id=k&ack=", wantError: replica.ErrInvalidArgument},
		{name: "empty from", query: "id=k&from=", wantError: replica.ErrInvalidArgument},
		{name: "zero ack", query: "id=k&ack=0", wantError: replica.ErrInvalidArgument},
		{name: "zero from", query: "id=k&from=0", wantError: replica.ErrInvalidArgument},
		{name: "negative ack", query: "id=k&ack=-1", wantError: replica.ErrInvalidArgument},
		{name: "negative from", query: "id=k&from=-2", wantError: replica.ErrInvalidArgument},
		{name: "ack not a number", query: "id=k&ack=one", wantError: replica.ErrInvalidArgument},
		{name: "from not a number", query: "id=k&from=2.5", wantError: replica.ErrInvalidArgument},
		{name: "ack overflow", query: "id=k&ack=99999999999999999999", wantError: replica.ErrInvalidArgument},
		{name: "two acks", query: "id=k&ack=1&ack=2", wantError: replica.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEntityQuery(tt.query)
			if tt.wantError != nil {
				if !errors.Is(err, tt.wantError) {
					t.Fatalf("ParseEntityQuery(%.40q) error = %v, want %v", tt.query, err, tt.wantError)
				}
				if HTTPStatus(err) != 400 {
					t.Errorf("HTTPStatus(%v) = %d, want 400", err, HTTPStatus(err))
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q is not one line", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEntityQuery(%.40q) error = %v, want nil", tt.query, err)
			}
			if string(got.Key) != tt.wantKey || got.Ack != tt.wantAck || got.From != tt.wantFrom {
				t.Errorf("got key=%.20q ack=%d from=%d, want key=%.20q ack=%d from=%d",
					got.Key, got.Ack, got.From, tt.wantKey, tt.wantAck, tt.wantFrom)
			}
		})
	}
}

func FuzzParseEntityQuery(f *testing.F) {
	for _, q := range []string{"id=k", "id=k&ack=1&from=2", "id=", "id=%zz", "id=k&ack=0", "id=k&ack=3&from=2", "id=a&id=b", "id=k&from=", ";id=k"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		e, err := ParseEntityQuery(q)
		if err != nil {
			if code := HTTPStatus(err); code != 400 {
				t.Fatalf("ParseEntityQuery(%q) error %v maps to %d, want 400", q, err, code)
			}
			return
		}
		if e.Ack < 0 || e.From < 0 {
			t.Fatalf("ParseEntityQuery(%q) = ack %d from %d, want neither negative", q, e.Ack, e.From)
		}
	})
}
