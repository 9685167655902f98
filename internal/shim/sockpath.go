package shim

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// sunPathMax is the longest socket path passed to bind/connect directly:
// sockaddr_un holds 104 bytes on darwin and the BSDs, 108 on Linux, NUL
// included. Longer paths go through withShortPath's platform fallback.
const sunPathMax = 103

// withShortPath calls fn with a name for path that fits a sockaddr_un: path
// itself when it is short enough, otherwise a platform-specific alias
// (Linux: /proc/self/fd/<dir fd>/<base>) valid for the duration of fn.
func withShortPath(path string, fn func(name string) error) error {
	if len(path) <= sunPathMax {
		return fn(path)
	}
	return withAliasPath(path, fn)
}

// dialSocket connects to the unix socket at path, however long it is.
func dialSocket(ctx context.Context, path string) (*net.UnixConn, error) {
	var conn net.Conn
	err := withShortPath(path, func(name string) error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "unix", name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return conn.(*net.UnixConn), nil
}

// isNoShim reports whether a dial error means nobody serves the path.
func isNoShim(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ENOTDIR)
}

// listenSocket binds path with mode 0600 and no window in which the socket
// is reachable with looser permissions: it binds a temporary name in the
// same directory, chmods it, and renames it over path (which also replaces
// a stale socket file left by a dead shim atomically). A live shim already
// serving path is ErrSocketInUse. The returned FileInfo identifies the
// socket file, so that shutdown removes only its own.
func listenSocket(path string) (*net.UnixListener, os.FileInfo, error) {
	if conn, err := dialSocket(context.Background(), path); err == nil {
		conn.Close()
		return nil, nil, ErrSocketInUse
	} else if errors.Is(err, ErrSocketPathTooLong) {
		return nil, nil, err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"~")
	os.Remove(tmp) // a leftover of a shim that died while binding
	var ln *net.UnixListener
	err := withShortPath(tmp, func(name string) error {
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	// The name bound may be a /proc alias that means something else later;
	// removal is ours to do, by the real path.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, nil, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return ln, fi, nil
}

// removeSocket removes path if it is still the socket file fi describes
// (and not one a newer shim put there).
func removeSocket(path string, fi os.FileInfo) {
	if cur, err := os.Lstat(path); err == nil && os.SameFile(cur, fi) {
		os.Remove(path)
	}
}
