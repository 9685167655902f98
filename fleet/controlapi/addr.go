package controlapi

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Default file names in the server's state directory.
const (
	// SocketName is the default unix socket of the API.
	SocketName = "control.sock"
	// TokenName is the bearer token file of TCP mode.
	TokenName = "control.token"
)

// Addr is where the API listens: a unix socket or a TCP address.
type Addr struct {
	// Network is "unix" or "tcp".
	Network string
	// Address is the socket path or "host:port".
	Address string
}

// IsUnix reports whether a is a unix socket.
func (a Addr) IsUnix() bool { return a.Network == "unix" }

// String is the form ParseAddr reads: "unix:PATH" or "HOST:PORT".
func (a Addr) String() string {
	if a.IsUnix() {
		return "unix:" + a.Address
	}
	return a.Address
}

// DefaultAddr is the API's default: the unix socket in stateDir.
func DefaultAddr(stateDir string) Addr {
	return Addr{Network: "unix", Address: filepath.Join(stateDir, SocketName)}
}

// ParseAddr reads an API address: "unix:PATH", an absolute path (a unix
// socket), or "HOST:PORT" (TCP; the host must be an IP literal or
// "localhost").
func ParseAddr(s string) (Addr, error) {
	switch {
	case s == "":
		return Addr{}, &AddrError{Addr: s, Reason: "empty"}
	case strings.ContainsRune(s, 0):
		return Addr{}, &AddrError{Addr: s, Reason: "contains NUL"}
	case strings.HasPrefix(s, "unix:"):
		p := strings.TrimPrefix(strings.TrimPrefix(s, "unix:"), "//")
		if p == "" {
			return Addr{}, &AddrError{Addr: s, Reason: "empty socket path"}
		}
		return Addr{Network: "unix", Address: filepath.Clean(p)}, nil
	case filepath.IsAbs(s):
		return Addr{Network: "unix", Address: filepath.Clean(s)}, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Addr{}, &AddrError{Addr: s, Reason: err.Error()}
	}
	if host != "localhost" && host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			return Addr{}, &AddrError{Addr: s, Reason: fmt.Sprintf("host %q is not an IP address or localhost", host)}
		}
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return Addr{}, &AddrError{Addr: s, Reason: fmt.Sprintf("bad port %q", port)}
	}
	return Addr{Network: "tcp", Address: s}, nil
}

// isLoopback reports whether a TCP address binds loopback only. An empty
// host means every interface.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// ListenOptions tune Listen.
type ListenOptions struct {
	// AllowRemote permits a TCP address outside loopback. Without it
	// Listen returns a *NotLoopbackError.
	AllowRemote bool
}

// Listen opens the API's listener. A unix socket is created mode 0600 in a
// directory created 0700 if missing; a stale socket left by a dead server
// is replaced, a live one is an error. TCP addresses must be loopback
// unless opts.AllowRemote.
func Listen(a Addr, opts ListenOptions) (net.Listener, error) {
	switch a.Network {
	case "unix":
		return listenUnix(a.Address)
	case "tcp":
		if !opts.AllowRemote && !isLoopback(a.Address) {
			return nil, &NotLoopbackError{Addr: a.Address}
		}
		addr := a.Address
		if host, port, _ := net.SplitHostPort(addr); host == "localhost" {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return net.Listen("tcp", addr)
	default:
		return nil, &AddrError{Addr: a.String(), Reason: "unknown network " + a.Network}
	}
}

func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("controlapi: socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("controlapi: %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("controlapi: a server already listens on %s", path)
		}
		// Nobody answers: a socket left by a server that died.
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("controlapi: remove stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// The socket is the API's only guard in unix mode: only its owner
	// may connect.
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("controlapi: restrict socket: %w", err)
	}
	return l, nil
}

// LoadOrCreateToken returns the bearer token stored at path, creating the
// file (mode 0600, 256 random bits) when it does not exist. A token file
// readable by others is refused.
func LoadOrCreateToken(path string) (string, error) {
	tok, err := ReadToken(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("controlapi: token directory: %w", err)
	}
	tok = rand.Text() + rand.Text()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) { // created meanwhile by another server
			return ReadToken(path)
		}
		return "", fmt.Errorf("controlapi: create token: %w", err)
	}
	_, werr := f.WriteString(tok + "\n")
	serr := f.Sync()
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("controlapi: write token: %w", err)
	}
	return tok, nil
}

// ReadToken reads a bearer token file written by LoadOrCreateToken.
func ReadToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("controlapi: token: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("controlapi: token file %s is mode %v; it must be readable by its owner only (0600)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("controlapi: token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("controlapi: token file %s is empty", path)
	}
	return tok, nil
}

// tokenMatches compares in constant time.
func tokenMatches(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
