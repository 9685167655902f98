//go:build !linux

package cache

// spreadVersions is a Linux (ext4) optimisation; elsewhere there is
// nothing to do.
func spreadVersions(root string) error { return nil }
