package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// A range move into this store (node/cluster's Mover) records how far it has come as a
// MovePoint, so that a receiver killed mid-move pulls on from there once restarted instead of
// from the start of the range. The points live in a sidecar beside badger (pointsFile), not in
// it: every badger key is token-prefixed data that scans, counts and trees would see.
//
// A point may only name records that are durable here: SaveMovePoint syncs badger's
// write-ahead log and value log first (badger.DB.Sync), then replaces the sidecar (write,
// fsync, rename). So a point survives what the records before it survive — a SIGKILL (the
// applied records are in badger's log in the page cache when ApplyBatch returns) and, thanks
// to the sync, a power loss, with or without --sync-writes. A store opened damaged, or whose
// files were moved aside, forgets its points (the sidecar goes aside with them): its moves
// start again from the beginning.

// pointsFile is the sidecar of the moves' points in the store's directory.
const pointsFile = "RINGKV-MOVES"

// MovePoint is how far a move of the token range (Start, End] into this store has come: the
// records its source held up to the store key After (in store-key order) are applied here.
// Keys and Bytes are what the move had counted up to After.
type MovePoint struct {
	Change uint64 `json:"change"`
	Index  int    `json:"index"`
	Start  uint64 `json:"start"`
	End    uint64 `json:"end"`
	Source string `json:"source"`
	After  []byte `json:"after"`
	Keys   uint64 `json:"keys"`
	Bytes  uint64 `json:"bytes"`
}

// movePoints is the store's set of points, by change and move index. Safe for concurrent use.
type movePoints struct {
	path string // "" in memory: the points are kept, not persisted

	mu  sync.Mutex
	all map[[2]uint64]MovePoint
}

func pointKey(change uint64, index int) [2]uint64 { return [2]uint64{change, uint64(index)} }

// openPoints reads the sidecar in dir ("" in memory). keep false forgets what it holds.
func openPoints(dir string, keep bool) (*movePoints, error) {
	p := &movePoints{all: map[[2]uint64]MovePoint{}}
	if dir == "" {
		return p, nil
	}
	p.path = filepath.Join(dir, pointsFile)
	b, err := os.ReadFile(p.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return p, nil
	case err != nil:
		return nil, fmt.Errorf("%s: %w", pointsFile, err)
	}
	if !keep {
		return p, p.write()
	}
	var list []MovePoint
	if err := json.Unmarshal(b, &list); err != nil {
		// A point only saves work: a sidecar that cannot be read costs the moves a new start.
		return p, p.write()
	}
	for _, mp := range list {
		p.all[pointKey(mp.Change, mp.Index)] = mp
	}
	return p, nil
}

// write replaces the sidecar with the points; the caller holds mu (or owns p).
func (p *movePoints) write() error {
	if p.path == "" {
		return nil
	}
	list := make([]MovePoint, 0, len(p.all))
	for _, mp := range p.all {
		list = append(list, mp)
	}
	slices.SortFunc(list, func(a, b MovePoint) int {
		if a.Change != b.Change {
			return cmpUint(a.Change, b.Change)
		}
		return a.Index - b.Index
	})
	b, err := json.Marshal(list)
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(p.path, b); err != nil {
		return fmt.Errorf("write %s: %w", pointsFile, err)
	}
	return nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SaveMovePoint makes every record applied so far durable, then records p (replacing the
// point of the same change and move).
func (s *Store) SaveMovePoint(p MovePoint) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if !s.cfg.InMemory {
		s.dbMu.RLock()
		err := s.db.Sync()
		s.dbMu.RUnlock()
		if err != nil {
			return fmt.Errorf("save move point: sync: %w", err)
		}
	}
	s.points.mu.Lock()
	defer s.points.mu.Unlock()
	p.After = slices.Clone(p.After)
	s.points.all[pointKey(p.Change, p.Index)] = p
	return s.points.write()
}

// MovePoint returns the point of move index of change, if one was saved.
func (s *Store) MovePoint(change uint64, index int) (MovePoint, bool) {
	s.points.mu.Lock()
	defer s.points.mu.Unlock()
	p, ok := s.points.all[pointKey(change, index)]
	return p, ok
}

// DropMovePoints forgets the points of every change except keep (0: all of them), and of
// move index of keep when index >= 0. The point of one move (index >= 0), a move done, is
// forgotten in memory only — the sidecar drops it with the next write — as nothing pulls a
// move done again: one fsync fewer for every move.
func (s *Store) DropMovePoints(keep uint64, index int) error {
	s.points.mu.Lock()
	defer s.points.mu.Unlock()
	if index >= 0 {
		delete(s.points.all, pointKey(keep, index))
		return nil
	}
	n := len(s.points.all)
	for k := range s.points.all {
		if k[0] != keep {
			delete(s.points.all, k)
		}
	}
	if len(s.points.all) == n {
		return nil
	}
	return s.points.write()
}
