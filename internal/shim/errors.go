package shim

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns for one of these
// conditions matches it with errors.Is.
var (
	// ErrNoShim: nothing answers on the socket (no such file, connection
	// refused, or the shim went away during the handshake). The shim and
	// therefore its worker are gone: the agent reports the instance lost.
	ErrNoShim = errors.New("shim: no shim at socket")
	// ErrWrongShim: a shim answered but refused the handshake because the
	// instance id or the token does not match (a stale or reused socket path).
	ErrWrongShim = errors.New("shim: wrong shim for this instance")
	// ErrReplaced: another agent attached to the shim, which closed this
	// connection. Only one agent is attached at a time.
	ErrReplaced = errors.New("shim: replaced by a newer attachment")
	// ErrDisconnected: the connection to the shim broke without the shim
	// saying goodbye.
	ErrDisconnected = errors.New("shim: connection to shim lost")
	// ErrClosed: the Client was closed by its owner.
	ErrClosed = errors.New("shim: client closed")
	// ErrStdinClosed: a write came after the worker's stdin was closed.
	ErrStdinClosed = errors.New("shim: worker stdin is closed")
	// ErrExited: the worker has exited, so it can no longer be written to
	// or signalled.
	ErrExited = errors.New("shim: worker has exited")
	// ErrBusy: the shim already holds too many bytes not yet written to the
	// worker's stdin (the worker does not read its input, and earlier Writes
	// were abandoned by their ctx). The Write was not done at all.
	ErrBusy = errors.New("shim: worker stdin backlog full")
	// ErrTooLarge: a Client.Write of more than MaxWrite bytes.
	ErrTooLarge = errors.New("shim: message too large")
	// ErrBadSignal: Client.Signal was asked for a signal other than TERM,
	// KILL, INT or HUP.
	ErrBadSignal = errors.New("shim: unsupported signal")
	// ErrSocketInUse: a live shim already serves the socket path.
	ErrSocketInUse = errors.New("shim: socket path served by a live shim")
	// ErrSocketPathTooLong: the socket path does not fit a sockaddr_un and
	// this platform has no way around it (see the package documentation).
	ErrSocketPathTooLong = errors.New("shim: socket path too long")
	// ErrInvalidConfig: a Config, StartConfig or AttachConfig field is wrong.
	ErrInvalidConfig = errors.New("shim: invalid configuration")
	// ErrProtocol: a frame could not be parsed or made no sense.
	ErrProtocol = errors.New("shim: protocol error")
	// ErrUnsupported: this platform cannot run shims (not unix).
	ErrUnsupported = errors.New("shim: unsupported platform")
)

// Error codes carried by refused handshakes, request responses and the
// shim's readiness line. RemoteError maps them onto the sentinels above.
const (
	CodeVersion       = "version"        // unsupported protocol version
	CodeWrongInstance = "wrong_instance" // the shim serves another instance
	CodeBadToken      = "bad_token"      // the token does not match
	CodeBadResume     = "bad_resume"     // resumeFrom lies beyond the stream's end
	CodeBadRequest    = "bad_request"    // a request the shim could not understand
	CodeStdinClosed   = "stdin_closed"   // write after close_stdin
	CodeExited        = "exited"         // the worker has exited
	CodeBusy          = "busy"           // stdin backlog full
	CodeConfig        = "config"         // the shim's configuration is invalid
	CodeSocketInUse   = "socket_in_use"  // another live shim serves the socket
	CodeSocketPath    = "socket_path"    // the socket path cannot be used
	CodeListen        = "listen"         // the socket could not be created
	CodeSpawn         = "spawn"          // the worker could not be started
)

// RemoteError is an error the shim reported: a refused handshake, a failed
// request, or a failed start. errors.Is matches it against the sentinel that
// its Code stands for (ErrWrongShim for wrong_instance and bad_token, …).
type RemoteError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("shim: %s: %s", e.Code, e.Message)
}

// Is reports whether the code stands for target.
func (e *RemoteError) Is(target error) bool {
	switch e.Code {
	case CodeWrongInstance, CodeBadToken:
		return target == ErrWrongShim
	case CodeStdinClosed:
		return target == ErrStdinClosed
	case CodeExited:
		return target == ErrExited
	case CodeBusy:
		return target == ErrBusy
	case CodeSocketInUse:
		return target == ErrSocketInUse
	case CodeConfig:
		return target == ErrInvalidConfig
	case CodeVersion, CodeBadResume, CodeBadRequest:
		return target == ErrProtocol
	}
	return false
}

// GapError says that stdout lines From through To-1 were dropped before any
// agent acknowledged them: the shim's buffer overflowed while the agent was
// detached or too slow. A Client delivers it as an EventGap, in stream order.
type GapError struct {
	From, To uint64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("shim: stdout lines %d..%d lost (buffer overflow)", e.From, e.To-1)
}

// Lines is how many lines were lost.
func (e *GapError) Lines() uint64 { return e.To - e.From }

// FrameError describes a frame that could not be parsed. It matches
// ErrProtocol.
type FrameError struct {
	Type   frameType
	Reason string
}

func (e *FrameError) Error() string {
	if e.Type == 0 {
		return "shim: bad frame: " + e.Reason
	}
	return fmt.Sprintf("shim: bad %s frame: %s", e.Type, e.Reason)
}

// Is makes a FrameError match ErrProtocol.
func (e *FrameError) Is(target error) bool { return target == ErrProtocol }

// ConfigError names the configuration field that is wrong. It matches
// ErrInvalidConfig.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("shim: invalid %s: %s", e.Field, e.Reason)
}

// Is makes a ConfigError match ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }
