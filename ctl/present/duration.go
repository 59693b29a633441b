package present

import "time"

// Duration is how kvctl and the console print a wait, an ETA or a span: rounded to the
// second, in Go's notation: "12s", "3m4s", "1h2m3s"; "-" when not positive (no estimate).
func Duration(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

// ETA is Duration of an estimate in seconds as the wire carries it (eta_seconds).
func ETA(seconds float64) string { return Duration(time.Duration(seconds * float64(time.Second))) }

// Took is Duration of a finished span between two Unix times in seconds; "0s" when it took
// less than a second.
func Took(startUnix, endUnix int64) string {
	if endUnix <= startUnix {
		return "0s"
	}
	return Duration(time.Duration(endUnix-startUnix) * time.Second)
}

// Elapsed is a span kvctl measured itself, to the millisecond: "1.234s", "2m3.456s".
func Elapsed(d time.Duration) string { return d.Round(time.Millisecond).String() }
