package node

import (
	"log/slog"
	"net"
	"testing"
)

// Without a secret or TLS, internal RPCs are accepted from the founders' and the ring
// members' addresses, host names resolved; anyone else is refused (server.GRPCConfig.Member).
func TestMemberIPs(t *testing.T) {
	n := &Node{logger: slog.New(slog.DiscardHandler), cfg: Config{Peers: []Peer{
		{ID: "n1", Addr: "192.0.2.7:9090"}, {ID: "n2", Addr: "localhost:9091"}, {ID: "n3", Addr: "[2001:db8::5]:9090"},
	}}}
	m := &memberIPs{n: n}
	for _, tt := range []struct {
		ip   string
		want bool
	}{
		{"192.0.2.7", true},
		{"127.0.0.1", true}, // localhost
		{"2001:db8::5", true},
		{"192.0.2.8", false},
		{"10.1.2.3", false},
	} {
		if got := m.allowed(net.ParseIP(tt.ip)); got != tt.want {
			t.Errorf("allowed(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
	if m.allowed(nil) {
		t.Errorf("allowed(nil) = true, want false")
	}
}
