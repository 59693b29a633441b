package tcpinfo

import (
	"context"
	"io"
	"net"
	"runtime"
	"testing"
)

// TestCountsGrowAndOutliveTheConnection: the segments sent over a dialed connection are
// counted for its address, and still are once it is closed; another address has none.
func TestCountsGrowAndOutliveTheConnection(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_INFO is read on Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	tr := New()
	c, err := tr.Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for range 16 {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	open := tr.Counts(ln.Addr().String())
	if open.Segments == 0 {
		t.Fatalf("segments sent over an open connection = 0, want > 0")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if closed := tr.Counts(ln.Addr().String()); closed.Segments < open.Segments {
		t.Errorf("segments after close = %d, want >= %d", closed.Segments, open.Segments)
	}
	if other := tr.Counts("127.0.0.1:1"); other != (Counts{}) {
		t.Errorf("counts of an address never dialed = %+v, want zero", other)
	}
}
