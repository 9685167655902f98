//go:build unix

package main

import "syscall"

// freeSpace is how many bytes an unprivileged writer may still write on
// dir's file system.
func freeSpace(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true
}
