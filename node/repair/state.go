package repair

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"ringkv/node/store"
)

// StateFile is the sidecar in a node's data directory where State persists (JSON, replaced
// atomically). It lives beside badger, not in it: every badger key is token-prefixed data
// that scans, counts and trees would see.
const StateFile = "repair-state.json"

// Mark is what a replica remembers of the last completed repair of one of its ranges.
type Mark struct {
	Start, End uint64
	// Started is when the repair began comparing the range (its trees were built after it);
	// Finished when every replica of the range was repaired.
	StartedUnixNanos, FinishedUnixNanos int64
}

// State is a node's durable record of which of its ranges a completed repair covered and
// when. Safe for concurrent use.
type State struct {
	path string // "" = in memory only

	mu    sync.Mutex
	marks map[[2]uint64]Mark
}

type stateFile struct {
	Version int    `json:"version"`
	Ranges  []Mark `json:"ranges"`
}

// OpenState reads the state in dir (empty for an in-memory node: nothing persists). A
// missing file is an empty state.
func OpenState(dir string) (*State, error) {
	s := &State{marks: map[[2]uint64]Mark{}}
	if dir == "" {
		return s, nil
	}
	s.path = filepath.Join(dir, StateFile)
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("repair state: %w", err)
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("repair state %s: %w", s.path, err)
	}
	for _, m := range f.Ranges {
		s.marks[[2]uint64{m.Start, m.End}] = m
	}
	return s, nil
}

// Mark returns the mark of the range (start, end]; ok is false when no repair covered it.
func (s *State) Mark(start, end uint64) (m Mark, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok = s.marks[[2]uint64{start, end}]
	return m, ok
}

// Record stores marks (a later Started replaces an earlier one) and persists the state.
func (s *State) Record(marks []Mark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range marks {
		k := [2]uint64{m.Start, m.End}
		if old, ok := s.marks[k]; ok && old.StartedUnixNanos > m.StartedUnixNanos {
			continue
		}
		s.marks[k] = m
	}
	if s.path == "" {
		return nil
	}
	f := stateFile{Version: 1}
	for _, m := range s.marks {
		f.Ranges = append(f.Ranges, m)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("repair state: %w", err)
	}
	if err := store.WriteFileAtomic(s.path, b); err != nil {
		return fmt.Errorf("repair state: %w", err)
	}
	return nil
}

// LastRepaired is the oldest Finished among the ranges (zero time when one was never
// repaired, or when there are none).
func (s *State) LastRepaired(ranges []Span) time.Time {
	if len(ranges) == 0 {
		return time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest int64
	for i, r := range ranges {
		m, ok := s.marks[[2]uint64{r.Start, r.End}]
		if !ok {
			return time.Time{}
		}
		if i == 0 || m.FinishedUnixNanos < oldest {
			oldest = m.FinishedUnixNanos
		}
	}
	return time.Unix(0, oldest)
}
