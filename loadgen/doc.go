// Package loadgen is the constant-rate load generator behind kvctl bench, as a library.
//
// Run drives a Target (the KV gRPC API, the HTTP API, or anything implementing the interface)
// with the load a Config describes. With Config.Rate > 0 it follows the open model of wrk2:
// request i is intended at start + i/Rate, spread evenly over Config.Connections workers (worker
// w sends requests w, w+C, w+2C, ...), whatever happened to earlier requests. Each latency is
// recorded twice: from the intended start (corrected for coordinated omission: a stall of the
// target shows up in every request that should have been sent during it) and from the actual
// send (uncorrected, what a closed-loop tool reports). With Rate 0 the workers send back to back
// (closed loop) and both are the same.
//
// Every worker owns its histograms (hdrhistogram-go is not safe for concurrent use); Run merges
// them when the workers are done. A collector goroutine takes each second's interval histogram
// from the workers for the live line (Config.OnInterval) and the interval log (WriteHlog).
//
// The generator watches itself: when it ends a run behind its own schedule by more than
// Config.MaxLag, the Result is Invalid and says why, and the Result carries its CPU use.
// A failed request is counted by kind and kept out of every latency histogram (as wrk
// does); a run with more failures than Config.MaxErrors is Invalid too.
//
// FindMax searches the highest rate that holds an SLO; WriteSummary, WriteHgrm, WriteHlog and
// WriteDiff print results.
package loadgen
