package loadgen

import "errors"

var (
	// ErrInvalidConfig marks a Config (or a flag string parsed into one) that cannot run.
	ErrInvalidConfig = errors.New("invalid load config")
	// ErrNoRateHolds is returned by FindMax when not even the lowest rate tried holds the SLO.
	ErrNoRateHolds = errors.New("no rate holds the slo")
	// ErrBadReport marks a JSON report that cannot be read back.
	ErrBadReport = errors.New("bad report")
)

// errBadResponse: an HTTP answer that is not HTTP/1.x as readResponse understands it.
var errBadResponse = errors.New("malformed http response")
