package cli

import (
	"time"

	"ringkv/proto/kvpb"
)

// AdminDeps is what a command of the Admin API (kvctl ring, kvctl repair) needs from the
// factory; tests replace Admin with a fake.
type AdminDeps struct {
	IO *IOStreams
	// Admin returns an Admin client of addr ("" = --addr).
	Admin func(addr string) (kvpb.AdminClient, error)
	JSON  func() bool
	Addr  func() string
	// Timeout bounds each unary call.
	Timeout time.Duration
}

// AdminDeps returns the factory's AdminDeps, with a 10s Timeout.
func (f *Factory) AdminDeps() AdminDeps {
	return AdminDeps{
		IO:      f.IO,
		Admin:   f.Admin,
		JSON:    f.JSON,
		Addr:    func() string { return f.Addr },
		Timeout: 10 * time.Second,
	}
}
