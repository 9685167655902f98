package shim

import (
	"fmt"
	"path/filepath"
	"syscall"
)

// withAliasPath names path through an open descriptor of its directory,
// /proc/self/fd/<n>/<base>, which the kernel resolves like the real path
// for bind and connect. Only the base name then counts against the limit.
func withAliasPath(path string, fn func(name string) error) error {
	dir, base := filepath.Split(path)
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("shim: open socket directory: %w", err)
	}
	defer syscall.Close(fd)
	alias := fmt.Sprintf("/proc/self/fd/%d/%s", fd, base)
	if len(alias) > sunPathMax {
		return fmt.Errorf("%w: base name %q is too long even through /proc/self/fd", ErrSocketPathTooLong, base)
	}
	return fn(alias)
}
