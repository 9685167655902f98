//go:build unix

package dialer

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time the process has used. Benchmarks report it
// next to wall time because the machine they run on is shared: wall time
// includes the time other processes held the cores.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
