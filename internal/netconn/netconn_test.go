package netconn

import (
	"crypto/tls"
	"net"
	"testing"
)

type wrapper struct{ net.Conn }

func (w wrapper) NetConn() net.Conn { return w.Conn }

func TestAs(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	wrapped := tls.Server(wrapper{a}, &tls.Config{}) // *tls.Conn → wrapper → the pipe's end
	if got, ok := As[wrapper](wrapped); !ok || got.Conn != a {
		t.Errorf("As[wrapper]: %v %v, want the wrapper of a", got, ok)
	}
	if got, ok := As[*tls.Conn](wrapped); !ok || got != wrapped {
		t.Errorf("As[*tls.Conn]: %v %v, want c itself", got, ok)
	}
	if _, ok := As[*net.TCPConn](wrapped); ok {
		t.Error("As[*net.TCPConn] found one under a pipe")
	}
}
