package server

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/rpcerr"
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
				if rpcerr.HTTPStatus(err) != 400 {
					t.Errorf("rpcerr.HTTPStatus(%v) = %d, want 400", err, rpcerr.HTTPStatus(err))
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
			if code := rpcerr.HTTPStatus(err); code != 400 {
				t.Fatalf("ParseEntityQuery(%q) error %v maps to %d, want 400", q, err, code)
			}
			return
		}
		if e.Ack < 0 || e.From < 0 {
			t.Fatalf("ParseEntityQuery(%q) = ack %d from %d, want neither negative", q, e.Ack, e.From)
		}
	})
}

// BenchmarkParseEntityQuery: the query of every /v0/entity request.
func BenchmarkParseEntityQuery(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseEntityQuery("id=key-12345&ack=2&from=3"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTTPPut: one PUT /v0/entity through the HTTP handler (no socket) to a coordinator
// that takes the value and answers at once: the handler's own cost.
func BenchmarkHTTPPut(b *testing.B) {
	h := NewHTTPServer(Data{Coordinator: nopCoordinator{}, View: func() *ring.View { return readyView(b) }, MaxValueSize: 1 << 20}, HTTPConfig{}).Handler
	body := bytes.Repeat([]byte("v"), 1000)
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	for b.Loop() {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.Header.SetMethod(fasthttp.MethodPut)
		ctx.Request.SetRequestURI("/v0/entity?id=key-12345")
		ctx.Request.SetBody(body)
		h(&ctx)
		if code := ctx.Response.StatusCode(); code != fasthttp.StatusCreated {
			b.Fatalf("status %d", code)
		}
	}
}

type nopCoordinator struct{}

func (nopCoordinator) Get(context.Context, []byte, int, int) (store.Record, bool, error) {
	return store.Record{}, false, nil
}
func (nopCoordinator) Put(context.Context, []byte, []byte, int, int) (uint64, error) { return 1, nil }
func (nopCoordinator) Delete(context.Context, []byte, int, int) (uint64, error)      { return 1, nil }

// readyView is a one-node ring, so that the HTTP handler serves.
func readyView(tb testing.TB) *ring.View {
	tb.Helper()
	tokens := ring.FounderTokens([]string{"n0"}, 4)
	r, err := ring.New(1, 1, []ring.Member{{ID: "n0", Addr: "n0", Tokens: tokens["n0"]}})
	if err != nil {
		tb.Fatalf("ring.New: %v", err)
	}
	return &ring.View{Current: r}
}
