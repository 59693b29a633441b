package loadgen

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestReadResponse(t *testing.T) {
	const next = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
	tests := []struct {
		name     string
		in       string
		wantCode int
		wantKeep bool
		wantErr  bool
		wantNext bool // the next response in the stream is read correctly after this one
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello" + next, 200, true, false, true},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nX-T: 1\r\n\r\n" + next, 200, true, false, true},
		{"chunked wins over length", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n" + next, 200, true, false, true},
		{"connection close", "HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 404, false, false, false},
		{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, false, false, false},
		{"http/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok" + next, 200, true, false, true},
		{"100 continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 504 Gateway Timeout\r\nContent-Length: 3\r\n\r\nabc" + next, 504, true, false, true},
		{"204 no body", "HTTP/1.1 204 No Content\r\n\r\n" + next, 204, true, false, true},
		{"lf only", "HTTP/1.1 200 OK\nContent-Length: 1\n\nx" + next, 200, true, false, true},
		{"no reason phrase", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n" + next, 200, true, false, true},
		{"body to eof", "HTTP/1.1 200 OK\r\n\r\nuntil the end", 200, false, false, false},
		{"truncated body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, false, true, false},
		{"truncated headers", "HTTP/1.1 200 OK\r\nContent-Le", 0, false, true, false},
		{"not http", "SSH-2.0-OpenSSH\r\n\r\n", 0, false, true, false},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, false, true, false},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 0, false, true, false},
		{"bad chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.in), 64)
			code, keep, err := readResponse(br)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got err %v, want error %v", err, tt.wantErr)
			}
			if code != tt.wantCode || keep != tt.wantKeep {
				t.Fatalf("got code %d keep %v, want %d %v", code, keep, tt.wantCode, tt.wantKeep)
			}
			if tt.wantNext {
				code, keep, err := readResponse(br)
				if err != nil || code != 201 || !keep {
					t.Fatalf("next response: got %d %v %v, want 201 true <nil>", code, keep, err)
				}
			}
		})
	}
}

func TestReadResponseLongLine(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader("HTTP/1.1 200 OK\r\nX: "+strings.Repeat("a", 100)+"\r\n\r\n"), 16)
	if _, _, err := readResponse(br); !errors.Is(err, errBadResponse) {
		t.Fatalf("got err %v, want errBadResponse", err)
	}
}

// TestHTTPBodiesAndReuse runs the HTTP target against answers of every body shape (chunked,
// closing, plain), twice on the same target (the second with Config.Spin): the second run must
// not trip over the first run's connections.
func TestHTTPBodiesAndReuse(t *testing.T) {
	tgt := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Query().Get("id"), "k"))
		switch n % 3 {
		case 0: // chunked
			_, _ = io.WriteString(w, "part one,")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "part two")
		case 1:
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		default:
			_, _ = io.WriteString(w, "plain")
		}
	}), 3)
	cfg := DefaultConfig()
	cfg.Rate, cfg.Warmup, cfg.Connections, cfg.Requests = 0, 0, 3, 300
	cfg.Keys, cfg.KeyDist, cfg.KeyPrefix = 300, KeyDist{Kind: DistSequential}, "k"
	for run := range 2 {
		if run == 1 {
			cfg.Spin = 50 * time.Microsecond // the event loop's busy-poll before it sleeps
		}
		r, err := Run(context.Background(), cfg, tgt)
		if err != nil {
			t.Fatal(err)
		}
		var errs int64
		for _, n := range r.Errors {
			errs += n
		}
		if r.Requests != 300 || errs != 0 || r.NotFound != 0 {
			t.Errorf("run %d: got %d requests, errors %v, want 300 and none", run, r.Requests, r.Errors)
		}
		if got, want := r.Uncorrected.TotalCount(), r.Corrected.TotalCount(); got != want {
			t.Errorf("run %d: got %d uncorrected, want %d (closed loop)", run, got, want)
		}
		if got := r.SendLag.TotalCount(); got != 300 || r.SendLag.Max() >= int64(time.Microsecond) {
			t.Errorf("run %d: got %d send lags max %d, want 300 zeros (below 1µs)", run, got, r.SendLag.Max())
		}
	}
}

// TestRespParserSplits: a response fed to respParser in pieces of every size parses as it does
// whole, and consumes exactly its own bytes.
func TestRespParserSplits(t *testing.T) {
	const next = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
	for _, in := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 504 Gateway Timeout\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\n\r\n",
	} {
		var whole respParser
		n, done, err := whole.feed([]byte(in + next))
		if err != nil || !done || n != len(in) {
			t.Fatalf("%q whole: consumed %d of %d, done %v, err %v", in, n, len(in), done, err)
		}
		for size := 1; size <= len(in); size++ {
			var p respParser
			var pending []byte
			used, done := 0, false
			for off := 0; off < len(in)+len(next) && !done; off += size {
				pending = append(pending, (in + next)[off:min(off+size, len(in)+len(next))]...)
				n, ok, err := p.feed(pending)
				if err != nil {
					t.Fatalf("%q in pieces of %d: %v", in, size, err)
				}
				used += n
				pending = pending[n:]
				done = ok
			}
			if !done || used != len(in) || p.code != whole.code || p.keep != whole.keep {
				t.Fatalf("%q in pieces of %d: done %v, consumed %d of %d, code %d keep %v; want %d %v",
					in, size, done, used, len(in), p.code, p.keep, whole.code, whole.keep)
			}
		}
	}
}

// FuzzRespParser: whatever the bytes, respParser neither panics nor consumes more than it got,
// and feeding them in two pieces ends as feeding them whole does.
func FuzzRespParser(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), 7)
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), 3)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		var whole respParser
		n, done, err := whole.feed(b)
		if n < 0 || n > len(b) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		if cut < 0 || cut > len(b) {
			return
		}
		var p respParser
		n1, done1, err1 := p.feed(b[:cut])
		if err1 != nil || done1 {
			return // decided by the first piece alone
		}
		rest := b[n1:]
		n2, done2, err2 := p.feed(rest)
		if p.st == psEOFBody || whole.st == psEOFBody {
			return // a body to the end of the connection consumes what it gets
		}
		if (err2 != nil) != (err != nil) || done2 != done || (err == nil && n1+n2 != n) {
			t.Fatalf("in two pieces at %d: consumed %d+%d done %v err %v; whole: %d %v %v",
				cut, n1, n2, done2, err2, n, done, err)
		}
	})
}
