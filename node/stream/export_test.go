package stream

import "time"

// Booked is when the bytes rc's pulls have booked so far are paid for.
func Booked(rc *RangeClient) time.Time {
	rc.lim.mu.Lock()
	defer rc.lim.mu.Unlock()
	return rc.lim.next
}
