package shim

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Defaults for the Config fields left zero.
const (
	DefaultMaxLine          = 16 << 20
	DefaultBufferBytes      = 32 << 20
	DefaultWindow           = 4 << 20
	DefaultLinger           = 24 * time.Hour
	DefaultKillGrace        = 3 * time.Second
	DefaultDrainTimeout     = 2 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second

	// StderrTailBytes is how much of the worker's stderr the shim keeps.
	StderrTailBytes = 4096
)

// Signal names a signal the agent may send to the worker's process group,
// and the signal that ended a worker (ExitStatus.Signal).
type Signal string

// The signals Client.Signal accepts.
const (
	SignalTerm Signal = "TERM"
	SignalKill Signal = "KILL"
	SignalInt  Signal = "INT"
	SignalHup  Signal = "HUP"
)

// Config is what one shim runs and how. The agent fills it in StartConfig;
// Start hands it to the shim process as JSON, so the func and logger fields
// (json:"-") only matter to Serve called in process.
type Config struct {
	// InstanceID names the worker (pifleet's "i-" + 12 hex). A handshake
	// for another id is refused.
	InstanceID string `json:"instanceId"`
	// Token is the secret the agent generated for this shim (NewToken) and
	// keeps in its state; a handshake without it is refused.
	Token string `json:"token"`
	// Socket is the absolute path of the unix socket the shim listens on,
	// normally inside the agent's state directory. A stale socket file there
	// is replaced; a live shim there is an error (ErrSocketInUse).
	Socket string `json:"socket"`
	// Command is the worker's argv. Command[0] without a slash is looked up
	// in the shim's PATH.
	Command []string `json:"command"`
	// Dir is the worker's working directory ("" = the shim's).
	Dir string `json:"dir,omitempty"`
	// Env is the worker's complete environment (nil = the shim's).
	Env []string `json:"env"`

	// MaxLine caps one stdout line (default 16 MiB). A longer line is
	// discarded as it streams by and delivered as an overlong marker.
	MaxLine int `json:"maxLine,omitempty"`
	// BufferBytes caps the unacknowledged stdout the shim keeps (default
	// 32 MiB). When it overflows the oldest lines are dropped and reported
	// as a gap.
	BufferBytes int `json:"bufferBytes,omitempty"`
	// Window caps the stdout bytes sent to the attached agent but not yet
	// acknowledged (default 4 MiB); it bounds the Client's memory.
	Window int `json:"window,omitempty"`
	// Linger is how long an exited worker's shim waits for an agent to
	// attach and acknowledge the exit before it gives up (default 24 h).
	Linger time.Duration `json:"linger,omitempty"`
	// KillGrace is the time between SIGTERM and SIGKILL when the worker's
	// process group is torn down because the shim died or was told to stop
	// (default 3 s; the watchdog rounds it up to whole seconds).
	KillGrace time.Duration `json:"killGrace,omitempty"`
	// DrainTimeout bounds the wait for the worker's stdout and stderr to
	// reach EOF after it exited (default 2 s).
	DrainTimeout time.Duration `json:"drainTimeout,omitempty"`
	// HandshakeTimeout bounds the wait for a new connection's hello
	// (default 10 s).
	HandshakeTimeout time.Duration `json:"handshakeTimeout,omitempty"`

	// Logger receives the shim's log (default zerolog.Nop()).
	Logger zerolog.Logger `json:"-"`
	// Now is the clock for StartedAt and ExitedAt (default time.Now).
	Now func() time.Time `json:"-"`
	// OnReady, when set, is called once: the socket listens and the worker
	// has started. Main uses it to write the readiness line.
	OnReady func(Ready) `json:"-"`
}

// Ready is what a shim reports once it serves: its own pid, the worker's pid
// and the worker's process group. They are informational: the agent never
// signals these pids itself (they may be reused once the shim is gone); it
// asks the shim, which is the worker's parent.
type Ready struct {
	ShimPID   int `json:"shimPid"`
	WorkerPID int `json:"workerPid"`
	PGID      int `json:"pgid"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.MaxLine == 0 {
		c.MaxLine = DefaultMaxLine
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = DefaultBufferBytes
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.KillGrace == 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// maxMaxLine keeps a line frame's length inside its uint32 length field.
const maxMaxLine = 1<<31 - 1<<10

// validate reports the first wrong field as a *ConfigError.
func (c Config) validate() error {
	if err := checkIdentity(c.InstanceID, c.Token, c.Socket); err != nil {
		return err
	}
	if len(c.Command) == 0 || c.Command[0] == "" {
		return &ConfigError{"command", "empty"}
	}
	switch {
	case c.MaxLine < 0 || c.MaxLine > maxMaxLine:
		return &ConfigError{"maxLine", fmt.Sprintf("%d out of range", c.MaxLine)}
	case c.BufferBytes < 0:
		return &ConfigError{"bufferBytes", "negative"}
	case c.Window < 0:
		return &ConfigError{"window", "negative"}
	case c.Linger < 0 || c.KillGrace < 0 || c.DrainTimeout < 0 || c.HandshakeTimeout < 0:
		return &ConfigError{"timeouts", "negative duration"}
	}
	return nil
}

// checkIdentity validates what both Config and AttachConfig carry.
func checkIdentity(instanceID, token, socket string) error {
	switch {
	case instanceID == "":
		return &ConfigError{"instanceId", "empty"}
	case len(instanceID) > 256 || strings.ContainsFunc(instanceID, isControl):
		return &ConfigError{"instanceId", "longer than 256 bytes or holds control characters"}
	case token == "":
		return &ConfigError{"token", "empty"}
	case socket == "":
		return &ConfigError{"socket", "empty"}
	case !filepath.IsAbs(socket):
		return &ConfigError{"socket", fmt.Sprintf("%q is not absolute", socket)}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Status is a shim's account of its worker and stream.
type Status struct {
	InstanceID string    `json:"instanceId"`
	ShimPID    int       `json:"shimPid"`
	WorkerPID  int       `json:"workerPid"`
	PGID       int       `json:"pgid"`
	StartedAt  time.Time `json:"startedAt"`
	// Running is false once the worker has exited and its output drained;
	// Exit then says how it ended.
	Running bool        `json:"running"`
	Exit    *ExitStatus `json:"exit,omitempty"`
	// StdinClosed: close_stdin was done (or the worker exited).
	StdinClosed bool `json:"stdinClosed"`
	// StderrTail is the last StderrTailBytes of the worker's stderr
	// (invalid UTF-8 replaced).
	StderrTail string `json:"stderrTail,omitempty"`
	// NextSeq is the seq the next stream record will get.
	NextSeq uint64 `json:"nextSeq"`
	// FirstSeq is the oldest seq still buffered (NextSeq when none is).
	FirstSeq uint64 `json:"firstSeq"`
	// AckedThrough is the highest seq an agent acknowledged.
	AckedThrough uint64 `json:"ackedThrough"`
	// DroppedLines counts the lines pushed out of the full buffer before any
	// agent acknowledged them, over the shim's life. Some of them may have
	// reached an agent (sent, not yet acknowledged); the others were
	// reported as gaps.
	DroppedLines uint64 `json:"droppedLines"`
	// BufferedBytes is the size of the unacknowledged backlog.
	BufferedBytes int `json:"bufferedBytes"`
}

// ExitStatus says how the worker ended.
type ExitStatus struct {
	// Code is the exit code, or -1 when a signal ended the worker.
	Code int `json:"code"`
	// Signal names the signal that ended the worker ("KILL", "TERM", …).
	Signal   Signal    `json:"signal,omitempty"`
	ExitedAt time.Time `json:"exitedAt"`
	// StderrTail is the last StderrTailBytes of stderr at exit.
	StderrTail string `json:"stderrTail,omitempty"`
}

func (e ExitStatus) String() string {
	if e.Signal != "" {
		return "killed by SIG" + string(e.Signal)
	}
	return fmt.Sprintf("exit code %d", e.Code)
}

// EventKind says what an Event carries.
type EventKind uint8

// Event kinds.
const (
	// EventLine: one stdout line (Seq, Data, or Overlong).
	EventLine EventKind = iota + 1
	// EventGap: lines were lost before anyone acknowledged them (Gap).
	EventGap
	// EventExit: the worker exited; every line it wrote came before (Seq,
	// Exit). Acknowledging this Seq lets the shim finish.
	EventExit
)

func (k EventKind) String() string {
	switch k {
	case EventLine:
		return "line"
	case EventGap:
		return "gap"
	case EventExit:
		return "exit"
	}
	return fmt.Sprintf("EventKind(%d)", k)
}

// Event is one item of the ordered stream a Client delivers. Seqs start at
// 1, increase by one per line, and the exit record takes the seq after the
// last line; gaps carry no seq of their own.
type Event struct {
	Kind EventKind
	Seq  uint64
	// Data is the line without its LF and without one trailing CR. The
	// Client never reuses it.
	Data []byte
	// Overlong is non-zero when the line exceeded MaxLine: it was dropped
	// (Data is nil) and was this many bytes long.
	Overlong int64
	Gap      *GapError
	Exit     *ExitStatus
}

// requestSignals are the signals Client.Signal may ask for.
var requestSignals = map[Signal]syscall.Signal{
	SignalTerm: syscall.SIGTERM,
	SignalKill: syscall.SIGKILL,
	SignalInt:  syscall.SIGINT,
	SignalHup:  syscall.SIGHUP,
}
