// Package netconn finds the connection of a given type under wrappers (crypto/tls's, the
// node's connection limit) that expose the one they wrap by NetConn.
package netconn

import "net"

// As unwraps c through NetConn down to a T; false when there is none.
func As[T net.Conn](c net.Conn) (T, bool) {
	for range 8 {
		if t, ok := c.(T); ok {
			return t, true
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	var none T
	return none, false
}
