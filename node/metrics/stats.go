package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"ringkv/node/replica"
	"ringkv/proto/kvpb"
)

// Stats is what a node serves of its numbers, as Admin API snapshots and as Prometheus
// metrics: the Registry's, with the coordinator's circuit breakers. The coordinator observes
// its operations into the Registry, so it is built after it; Stats is built after both and
// takes each at construction, so that nothing is bound into the Registry late. Safe for
// concurrent use.
type Stats struct {
	reg      *Registry
	breakers func() []replica.Breaker
	prom     *prometheus.Registry
}

// NewStats joins r with breakers (replica.Coordinator.Breakers; nil = none).
func NewStats(r *Registry, breakers func() []replica.Breaker) *Stats {
	s := &Stats{reg: r, breakers: breakers}
	s.prom = newPromRegistry(s)
	return s
}

// Snapshot is the Registry's snapshot with the breakers' states.
func (s *Stats) Snapshot(withVnodes bool) *kvpb.NodeStats {
	ns := s.reg.Snapshot(withVnodes)
	if s.breakers != nil {
		for _, b := range s.breakers() {
			ns.Breakers = append(ns.Breakers, &kvpb.BreakerState{
				Peer: b.Peer, State: b.State.Proto(), ConsecutiveFailures: uint64(max(b.ConsecutiveFailures, 0)),
			})
		}
	}
	return ns
}

// Prometheus returns the registry /metrics serves: this node's collector plus the Go and
// process collectors.
func (s *Stats) Prometheus() *prometheus.Registry { return s.prom }
