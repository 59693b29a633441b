package server

import (
	"errors"
	"strings"
	"testing"

	"ringkv/node/replica"
)

func TestParseEntityQuery(t *testing.T) {
	long := strings.Repeat("k", MaxKeySize)
	tests := []struct {
		name      string
		query     string
		replicas  int
		wantKey   string
		wantAck   int
		wantFrom  int
		wantError error
	}{
		{name: "defaults of 3", query: "id=k", replicas: 3, wantKey: "k", wantAck: 2, wantFrom: 3},
		{name: "defaults of 1", query: "id=k", replicas: 1, wantKey: "k", wantAck: 1, wantFrom: 1},
		{name: "defaults of 2", query: "id=k", replicas: 2, wantKey: "k", wantAck: 2, wantFrom: 2},
		{name: "explicit", query: "id=k&ack=1&from=2", replicas: 3, wantKey: "k", wantAck: 1, wantFrom: 2},
		{name: "from only", query: "id=k&from=1", replicas: 3, wantKey: "k", wantAck: 1, wantFrom: 1},
		{name: "ack only", query: "id=k&ack=3", replicas: 3, wantKey: "k", wantAck: 3, wantFrom: 3},
		{name: "escaped key", query: "id=a%20b%2Fc", replicas: 3, wantKey: "a b/c", wantAck: 2, wantFrom: 3},
		{name: "key at the limit", query: "id=" + long, replicas: 1, wantKey: long, wantAck: 1, wantFrom: 1},
		{name: "unknown params ignored", query: "id=k&x=y", replicas: 1, wantKey: "k", wantAck: 1, wantFrom: 1},

		// Every 400 case.
		{name: "no query", query: "", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "missing id", query: "ack=1&from=1", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "empty id", query: "id=", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "bare id", query: "id", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "two ids", query: "id=a&id=b", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "malformed escape", query: "id=%zz", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "key over the limit", query: "id=" + long + "k", replicas: 3, wantError: replica.ErrKeyTooLarge},
		{name: "empty ack", query: "id=k&ack=", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "empty from", query: "id=k&from=", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "zero ack", query: "id=k&ack=0", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "zero from", query: "id=k&from=0", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "negative ack", query: "id=k&ack=-1", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "negative from", query: "id=k&from=-2", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "ack not a number", query: "id=k&ack=one", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "from not a number", query: "id=k&from=2.5", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "ack overflow", query: "id=k&ack=99999999999999999999", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "two acks", query: "id=k&ack=1&ack=2", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "ack over from", query: "id=k&ack=3&from=2", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "ack over default from", query: "id=k&ack=4", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "from over replicas", query: "id=k&from=4", replicas: 3, wantError: replica.ErrInvalidArgument},
		{name: "from over a single node", query: "id=k&ack=1&from=2", replicas: 1, wantError: replica.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEntityQuery(tt.query, tt.replicas)
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
		f.Add(q, 3)
	}
	f.Fuzz(func(t *testing.T, q string, replicas int) {
		if replicas < 1 || replicas > 64 {
			replicas = 3
		}
		e, err := ParseEntityQuery(q, replicas)
		if err != nil {
			if code := HTTPStatus(err); code != 400 {
				t.Fatalf("ParseEntityQuery(%q) error %v maps to %d, want 400", q, err, code)
			}
			return
		}
		if len(e.Key) == 0 || len(e.Key) > MaxKeySize {
			t.Fatalf("ParseEntityQuery(%q) accepted a key of %d bytes", q, len(e.Key))
		}
		if e.Ack < 1 || e.Ack > e.From || e.From > replicas {
			t.Fatalf("ParseEntityQuery(%q, %d) = ack %d from %d, want 1 <= ack <= from <= replicas", q, replicas, e.Ack, e.From)
		}
	})
}
