//go:build unix && !linux

package shim

import "testing"

// waitExitFunc cannot wait for a process that is not a child without
// pidfd; the witness FIFO still proves the worker's group is gone.
func waitExitFunc(t *testing.T, pid int) func() {
	t.Log("no pidfd on this platform: not waiting for the watchdog itself")
	return func() {}
}
