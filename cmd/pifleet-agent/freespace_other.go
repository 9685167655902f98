//go:build !unix

package main

// freeSpace is not measured on this platform.
func freeSpace(string) (uint64, bool) { return 0, false }
