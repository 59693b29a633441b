package server

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// HTTPSListener is tls.NewListener(ln, cfg) for the client API's server, which answers a
// plaintext request on its HTTPS port as net/http does: 400, "Client sent an HTTP request to
// an HTTPS server", rather than a closed connection the client cannot explain.
func HTTPSListener(ln net.Listener, cfg *tls.Config) net.Listener {
	return &httpsListener{Listener: ln, cfg: cfg}
}

type httpsListener struct {
	net.Listener
	cfg *tls.Config
}

func (l *httpsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &httpsConn{Conn: tls.Server(c, l.cfg)}, nil
}

// httpsConn is a server's TLS connection whose first read, the handshake, answers a
// plaintext HTTP request with a 400 on the raw connection.
type httpsConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

// plaintextRefusal is what net/http's server writes on its HTTPS port to a plaintext request.
const plaintextRefusal = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"

func (c *httpsConn) Read(b []byte) (int, error) {
	c.once.Do(func() {
		c.err = c.Handshake() // bounded by the read deadline the server set
		var re tls.RecordHeaderError
		if errors.As(c.err, &re) && re.Conn != nil && tlsRecordHeaderLooksLikeHTTP(re.RecordHeader) {
			re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			io.WriteString(re.Conn, plaintextRefusal)
		}
	})
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(b)
}

// tlsRecordHeaderLooksLikeHTTP: the first five bytes read as a TLS record start an HTTP
// request (net/http's test).
func tlsRecordHeaderLooksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH":
		return true
	}
	return false
}
