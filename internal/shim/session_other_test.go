//go:build !linux

package shim

import "testing"

// awaitSessionEnd needs /proc and pidfds, which only Linux has.
func awaitSessionEnd(t *testing.T, sid int) {
	t.Skip("needs Linux's /proc to see the shim's session")
}
