package heat

// The kinds of events a node keeps with its history, drawn on `kvctl heat`'s time axis.
const (
	// KindNodeStart: this node started (its history before is from its last run).
	KindNodeStart = "node-start"
	// KindRing: the ring's epoch moved (a change committed, a node admitted or removed).
	KindRing = "ring"
	// KindChangeBegin, KindChangeCommit and KindChangeAbort: a ring change began, committed
	// (its new ring is the current one) or was aborted.
	KindChangeBegin  = "change-begin"
	KindChangeCommit = "change-commit"
	KindChangeAbort  = "change-abort"
	// KindChangePause and KindChangeResume: a ring change was paused or resumed.
	KindChangePause  = "change-pause"
	KindChangeResume = "change-resume"
	// KindRepairStart and KindRepairEnd: a repair session this node coordinates started or
	// ended (done, failed or aborted, as the text says).
	KindRepairStart = "repair-start"
	KindRepairEnd   = "repair-end"
	// KindRepairPause and KindRepairResume: a repair session was paused or resumed.
	KindRepairPause  = "repair-pause"
	KindRepairResume = "repair-resume"
	// KindRate: the byte rate of a ring change or a repair was changed.
	KindRate = "rate"
	// KindNodeDown and KindNodeUp: a peer became unreachable from this node, or reachable again.
	KindNodeDown = "node-down"
	KindNodeUp   = "node-up"
)
