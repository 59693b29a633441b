package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

// Every reason of the enum has exactly one row, and the table names no other.
func TestEveryReasonHasOneRow(t *testing.T) {
	seen := map[kvpb.Reason]int{}
	for _, row := range Rows() {
		seen[row.Reason]++
	}
	for v, name := range kvpb.Reason_name {
		r := kvpb.Reason(v)
		want := 1
		if r == kvpb.Reason_REASON_UNSPECIFIED {
			want = 0
		}
		if seen[r] != want {
			t.Errorf("%s: %d rows, want %d", name, seen[r], want)
		}
	}
	if len(seen) != len(kvpb.Reason_name)-1 {
		t.Errorf("table has %d reasons, enum %d", len(seen), len(kvpb.Reason_name)-1)
	}
}

// A sentinel encoded by a server decodes to an error that matches the same sentinel, with
// the row's code, and keeps the message.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, row := range Rows() {
		t.Run(Name(row.Reason), func(t *testing.T) {
			sentinel := Sentinel(row.Reason)
			if e, ok := sentinel.(*Error); ok {
				sentinel = New(e.Reason(), "the domain's words")
			}
			err := Encode(fmt.Errorf("doing a thing: %w", sentinel))
			if got := status.Code(err); got != row.Code {
				t.Fatalf("code: got %v, want %v", got, row.Code)
			}
			dec := Decode(err)
			if !errors.Is(dec, sentinel) {
				t.Fatalf("errors.Is(Decode(%v), sentinel) = false", err)
			}
			if got := ReasonOf(dec); got != row.Reason {
				t.Fatalf("ReasonOf: got %v, want %v", got, row.Reason)
			}
			if got := ReasonOf(err); got != row.Reason {
				t.Fatalf("ReasonOf(undecoded): got %v, want %v", got, row.Reason)
			}
			if got := status.Code(Encode(dec)); got != row.Code {
				t.Fatalf("re-encoded code: got %v, want %v", got, row.Code)
			}
			if got, want := status.Convert(dec).Message(), "doing a thing: "+sentinel.Error(); got != want {
				t.Fatalf("message: got %q, want %q", got, want)
			}
		})
	}
}

func TestDecodeWithoutReason(t *testing.T) {
	plain := status.Error(codes.Unavailable, "connection refused")
	if got := Decode(plain); got != plain {
		t.Errorf("Decode of a status without reason: got %v, want it unchanged", got)
	}
	if dec := Decode(status.Error(codes.DeadlineExceeded, "late")); !errors.Is(dec, context.DeadlineExceeded) {
		t.Errorf("DeadlineExceeded without reason: got %v, want context.DeadlineExceeded", dec)
	}
	other := errors.New("not a status")
	if got := Decode(other); got != other {
		t.Errorf("Decode of a plain error: got %v, want it unchanged", got)
	}
	if Decode(nil) != nil {
		t.Error("Decode(nil) != nil")
	}
}

// Precedence: the first row that matches wins the code and HTTP status; the kind follows
// the kind order.
func TestPrecedence(t *testing.T) {
	notEnough := New(kvpb.Reason_REASON_NOT_ENOUGH_REPLICAS, "not enough replicas")
	diskFull := New(kvpb.Reason_REASON_DISK_FULL, "disk full")
	offset := New(kvpb.Reason_REASON_CLOCK_OFFSET, "clock offset")
	breaker := New(kvpb.Reason_REASON_BREAKER_OPEN, "breaker open")
	for _, tc := range []struct {
		name string
		err  error
		http int
		kind string
	}{
		{"disk full under not enough", fmt.Errorf("%w: %w", notEnough, diskFull), 507, KindUnavailable},
		{"clock offset under not enough", fmt.Errorf("%w: %w", notEnough, offset), 504, KindUnavailable},
		{"deadline under not enough", fmt.Errorf("%w: %w", notEnough, context.DeadlineExceeded), 504, KindTimeout},
		{"breaker under not enough", fmt.Errorf("%w: %w", notEnough, breaker), 504, KindBreakerOpen},
		{"unknown", errors.New("boom"), 500, KindInternal},
	} {
		if got := HTTPStatus(tc.err); got != tc.http {
			t.Errorf("%s: HTTPStatus got %d, want %d", tc.name, got, tc.http)
		}
		if got := Kind(tc.err); got != tc.kind {
			t.Errorf("%s: Kind got %s, want %s", tc.name, got, tc.kind)
		}
	}
}
