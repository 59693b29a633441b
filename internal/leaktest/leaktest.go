// Package leaktest holds the goroutines that tests of a running node let outlive it: the
// process-wide ones of its libraries, which goleak's checks ignore.
package leaktest

import "go.uber.org/goleak"

// NodeLibraries are goleak options for tests that run nodes in their process.
var NodeLibraries = []goleak.Option{
	// badger's and glog's process-wide goroutines.
	goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
	goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2/z.(*AllocatorPool).freeupAllocators"),
	goleak.IgnoreAnyFunction("github.com/dgraph-io/badger/v4/y.init.0.func1"),
	// fasthttp's (the client API's server): the process-wide clock of its Date headers, and
	// its worker pool's janitor, which sleeps out its period (10 s) after the server stops.
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
}
