package loadgen

import (
	"slices"
	"sync"
	"time"
)

// EventKind names what happened in the cluster during a run. The words are the JSON's
// (`events[].kind`), the chart's markers and the hlog comments'.
type EventKind string

// The events Follow records.
const (
	// EventChangeBegin: a ring change started (or was in flight when the run began).
	EventChangeBegin EventKind = "change-begin"
	// EventFirstChunk: the change's first records reached a receiver.
	EventFirstChunk EventKind = "first-chunk"
	// EventHandOver: every range is done; the ring is flipping to the change's epoch.
	EventHandOver EventKind = "hand-over"
	// EventCommit: the change committed: the ring is at its epoch.
	EventCommit EventKind = "commit"
	// EventAbort: the change was aborted: the ring stayed as it was.
	EventAbort EventKind = "abort"
	// EventPause and EventResume: the change stopped streaming, and went on.
	EventPause  EventKind = "pause"
	EventResume EventKind = "resume"
	// EventEpoch: the ring's epoch moved (the node asked routes by the new ring).
	EventEpoch EventKind = "epoch"
	// EventNodeDown and EventNodeUp: a member stopped answering, and answered again.
	EventNodeDown EventKind = "node-down"
	EventNodeUp   EventKind = "node-up"
	// EventRepairStart and EventRepairEnd: a repair session began, and ended (its state in
	// the text).
	EventRepairStart EventKind = "repair-start"
	EventRepairEnd   EventKind = "repair-end"
	// EventRate: the streaming rate of a change or a repair was changed.
	EventRate EventKind = "rate"
)

// Event is one thing that happened in the cluster, at the time the generator saw it.
type Event struct {
	At   time.Time
	Kind EventKind
	// Node is the member the event is about (node-down, node-up; the node a change adds or
	// removes), "" otherwise.
	Node string
	// Text says it for a reader: "add n4 (127.0.0.1:9094)", "n2 DOWN: connection refused".
	Text string
}

// phaseName is the name of the phase an event begins; "" for an event that only marks the
// chart (it cuts no phase).
func (e Event) phaseName() string {
	switch e.Kind {
	case EventChangeBegin, EventResume:
		return "streaming"
	case EventHandOver:
		return "hand-over"
	case EventCommit:
		return "after"
	case EventAbort:
		return "after abort"
	case EventPause:
		return "paused"
	case EventNodeDown:
		return e.Node + " down"
	case EventNodeUp:
		return e.Node + " back up"
	case EventRepairStart:
		return "repair"
	case EventRepairEnd:
		return "after repair"
	}
	return ""
}

// Marker is the short label of the event on a chart: "begin", "commit", "n2 down".
func (e Event) Marker() string {
	switch e.Kind {
	case EventChangeBegin:
		return "begin"
	case EventFirstChunk:
		return "1st chunk"
	case EventNodeDown:
		return e.Node + " down"
	case EventNodeUp:
		return e.Node + " up"
	case EventRepairStart:
		return "repair"
	case EventRepairEnd:
		return "repair end"
	}
	return string(e.Kind)
}

// EventLog gathers the events of a run. Safe for concurrent use.
type EventLog struct {
	mu     sync.Mutex
	events []Event
	notify func(Event)
}

// NewEventLog returns an empty log; notify, when set, is called with each event as it is
// added (from the adding goroutine: it must return quickly).
func NewEventLog(notify func(Event)) *EventLog { return &EventLog{notify: notify} }

// Add records e.
func (l *EventLog) Add(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	if l.notify != nil {
		l.notify(e)
	}
}

// Events returns the events recorded so far, oldest first.
func (l *EventLog) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.events)
	slices.SortStableFunc(out, func(a, b Event) int { return a.At.Compare(b.At) })
	return out
}
