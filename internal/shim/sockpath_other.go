//go:build !linux

package shim

import "fmt"

// withAliasPath has no way around the sockaddr_un limit on this platform:
// darwin and the BSDs have no /proc/self/fd, and changing directory would
// affect the whole process.
func withAliasPath(path string, fn func(name string) error) error {
	return fmt.Errorf("%w: %d bytes, at most %d on this platform: %s",
		ErrSocketPathTooLong, len(path), sunPathMax, path)
}
