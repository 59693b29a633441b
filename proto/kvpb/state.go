package kvpb

// InFlight reports whether s is the state of a change that has started and not finished:
// streaming, paused or handing over.
func (s ChangeState) InFlight() bool {
	return s == ChangeState_CHANGE_STATE_STREAMING || s == ChangeState_CHANGE_STATE_HANDING_OVER ||
		s == ChangeState_CHANGE_STATE_PAUSED
}

// Finished reports whether s is final: the change committed or was aborted.
func (s ChangeState) Finished() bool {
	return s == ChangeState_CHANGE_STATE_DONE || s == ChangeState_CHANGE_STATE_ABORTED
}

// InFlight reports whether a repair in this state is still running.
func (s RepairState) InFlight() bool { return s == RepairState_REPAIR_STATE_RUNNING }

// Finished reports whether a repair in this state has ended, well or not.
func (s RepairState) Finished() bool {
	return s == RepairState_REPAIR_STATE_DONE || s == RepairState_REPAIR_STATE_FAILED ||
		s == RepairState_REPAIR_STATE_ABORTED
}
