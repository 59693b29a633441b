package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// silence tracks the raft servers that miss this node's heartbeats while it leads: raft
// reports each failed heartbeat and each resumption to the observer. Safe for concurrent use.
type silence struct {
	mu    sync.Mutex
	since map[string]time.Time
}

func newSilence() *silence { return &silence{since: map[string]time.Time{}} }

// observe is a raft observer's filter: it records heartbeat failures and resumptions and
// lets nothing through to a channel.
func (s *silence) observe(o *raft.Observation) bool {
	switch d := o.Data.(type) {
	case raft.FailedHeartbeatObservation:
		s.mu.Lock()
		if _, ok := s.since[string(d.PeerID)]; !ok {
			t := d.LastContact
			if t.IsZero() {
				t = time.Now()
			}
			s.since[string(d.PeerID)] = t
		}
		s.mu.Unlock()
	case raft.ResumedHeartbeatObservation:
		s.mu.Lock()
		delete(s.since, string(d.PeerID))
		s.mu.Unlock()
	case raft.LeaderObservation:
		// A new term: what an earlier leadership saw is stale.
		s.mu.Lock()
		clear(s.since)
		s.mu.Unlock()
	}
	return false
}

// longerThan reports whether id has missed heartbeats for longer than d.
func (s *silence) longerThan(id string, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.since[id]
	return ok && time.Since(t) > d
}

// hasVote reports whether id votes in conf.
func hasVote(conf raft.Configuration, id string) bool {
	for _, s := range conf.Servers {
		if string(s.ID) == id {
			return s.Suffrage == raft.Voter
		}
	}
	return false
}
