package heat

// Metric is what a heat view shows of a cell.
type Metric int

// The metrics.
const (
	MetricOps Metric = iota
	MetricReads
	MetricWrites
	MetricBytes
	// MetricP99 is the higher of the read and write p99, in microseconds (0: no sample).
	MetricP99
	MetricErrors
)

// Value is c's value of m.
func (c Cell) Value(m Metric) uint64 {
	switch m {
	case MetricReads:
		return uint64(c.Reads)
	case MetricWrites:
		return uint64(c.Writes)
	case MetricBytes:
		return uint64(c.Bytes)
	case MetricErrors:
		return uint64(c.Errors)
	case MetricP99:
		if v := max(c.ReadP99, c.WriteP99); v > 0 {
			d, _ := P99(v)
			return uint64(d.Microseconds())
		}
		return 0
	}
	return uint64(c.Reads) + uint64(c.Writes)
}
