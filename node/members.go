package node

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ringkv/node/ring"
)

// memberIPs is what internal RPCs are accepted from when a node has neither a cluster secret
// nor TLS (server.GRPCConfig.Member): the addresses of the founders (--peers) and of the
// members of the current and next ring, resolved. The set is rebuilt when those addresses
// change, and at most every memberRefresh for host names. Safe for concurrent use.
type memberIPs struct {
	n *Node

	set atomic.Pointer[memberSet]
	mu  sync.Mutex // one rebuild at a time
}

type memberSet struct {
	key string // the sorted member addresses it was built from
	at  time.Time
	ips map[string]bool
}

// memberRefresh bounds how long a resolved host name is trusted.
const memberRefresh = 30 * time.Second

// allowed reports whether ip is a member's address.
func (m *memberIPs) allowed(ip net.IP) bool {
	if ip == nil {
		return false
	}
	return m.current().ips[ip.String()]
}

// addrs returns the member addresses the set is built from.
func (m *memberIPs) addrs() []string {
	var out []string
	for _, p := range m.n.cfg.Peers {
		out = append(out, p.Addr)
	}
	if v := m.view(); v != nil {
		for _, r := range []*ring.Ring{v.Current, v.Next} {
			if r == nil {
				continue
			}
			for _, mb := range r.Members() {
				out = append(out, mb.Addr)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (m *memberIPs) view() *ring.View {
	if m.n.cl == nil { // not built yet
		return nil
	}
	return m.n.View()
}

func (m *memberIPs) current() *memberSet {
	addrs := m.addrs()
	key := strings.Join(addrs, ",")
	if s := m.set.Load(); s != nil && s.key == key && time.Since(s.at) < memberRefresh {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.set.Load(); s != nil && s.key == key && time.Since(s.at) < memberRefresh {
		return s
	}
	s := &memberSet{key: key, at: time.Now(), ips: map[string]bool{}}
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); ip != nil {
			s.ips[ip.String()] = true
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
		cancel()
		if err != nil {
			m.n.logger.Warn("resolve a ring member's host", "host", host, "err", err)
			continue
		}
		for _, ip := range ips {
			s.ips[ip.String()] = true
		}
	}
	m.set.Store(s)
	return s
}
