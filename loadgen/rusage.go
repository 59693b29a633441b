package loadgen

import (
	"fmt"
	"runtime"
	"syscall"
	"time"
)

// CPU is the CPU time the generator's process used during a run.
type CPU struct {
	User, System time.Duration
	// Cores is (User+System) / wall time: 1.0 = one core busy all the time.
	Cores float64
	// NumCPU is the number of CPUs of the machine.
	NumCPU int
}

func (c CPU) String() string {
	return fmt.Sprintf("%.2f of %d cores (user %s, sys %s)", c.Cores, c.NumCPU,
		c.User.Round(time.Millisecond), c.System.Round(time.Millisecond))
}

func rusageNow() syscall.Rusage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // cannot fail for RUSAGE_SELF
	return ru
}

func cpuUse(a, b syscall.Rusage, wall time.Duration) CPU {
	user := time.Duration(b.Utime.Nano() - a.Utime.Nano())
	sys := time.Duration(b.Stime.Nano() - a.Stime.Nano())
	c := CPU{User: user, System: sys, NumCPU: runtime.NumCPU()}
	if wall > 0 {
		c.Cores = float64(user+sys) / float64(wall)
	}
	return c
}
