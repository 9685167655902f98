package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle"
	"example.com/pifleet/fleet/agent/internal/fsservice"
	"example.com/pifleet/internal/boltfile"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// Defaults of Config.
const (
	DefaultPort           = 9788
	DefaultRebindInterval = 60 * time.Second
	DefaultEventRing      = 4096
	DefaultStopGrace      = 5 * time.Second
	DefaultDialogTimeout  = 5 * time.Minute
	DefaultSessionsPoll   = 10 * time.Second
	DefaultProbeTimeout   = 30 * time.Second
	DefaultReadyTimeout   = 60 * time.Second
	// DefaultPeerQueueBytes is how far (in encoded bytes) one connection
	// may fall behind the events sent to it before it is dropped.
	DefaultPeerQueueBytes = 16 << 20
	// DefaultPeerQueueFrames bounds the same queue in frames.
	DefaultPeerQueueFrames = 8192
	// DefaultMaxConnsPerIdentity caps the connections one identity (a
	// machine and user, as whois names them) may hold open at once.
	DefaultMaxConnsPerIdentity = 8
	// SummaryChars caps task_done.summary.
	SummaryChars = 2000
	// MaxAssistantBytes caps task_done.lastAssistantMessage so that a
	// task_done always fits one frame.
	MaxAssistantBytes = 512 << 10
	// StderrTailChars is how much of a crashed worker's stderr an aborted
	// task_done carries.
	StderrTailChars = 1500
)

// FsAccess is how much the file service (fs_read, fs_list, fs_grep,
// fs_diff) may read: FsWorkspace (read-only, inside each worker's cwd) or
// FsOff (every request refused with fs_disabled).
type FsAccess = fsservice.Access

// File service access modes.
const (
	FsWorkspace = fsservice.AccessWorkspace
	FsOff       = fsservice.AccessOff
)

// ExecPolicy says whether the pinned server may run commands on this
// machine (the exec plane).
type ExecPolicy string

// Exec policies.
const (
	ExecOff  ExecPolicy = "off"
	ExecFull ExecPolicy = "full"
)

// IPProvider returns the address the listener binds to (the machine's
// tailscale IPv4 in production). The agent calls it at start and every
// RebindInterval; when the answer changes, it listens on the new address
// and stops accepting on the old one, leaving connections and workers
// alone.
type IPProvider func(ctx context.Context) (netip.Addr, error)

// Config configures an Agent. Pin, Whois and StateDir are required; the
// rest has defaults.
type Config struct {
	// Machine is the name hello announces (default: the short host name).
	Machine string

	// Listen is an explicit listen address ("127.0.0.1:0", "[::]:9788").
	// When empty, the agent binds IPProvider's address on Port: never all
	// interfaces unless Listen says so explicitly.
	Listen string
	// Port is used with IPProvider (default 9788).
	Port int
	// IPProvider gives the address to bind when Listen is empty (default:
	// `tailscale ip -4`).
	IPProvider IPProvider
	// RebindInterval is how often IPProvider is asked again (default 60 s).
	RebindInterval time.Duration

	// Dial lists server addresses (HOST:PORT, a server's inbound
	// address) the agent keeps a connection to, besides listening: for a
	// server that cannot reach this machine, or that learns of agents as
	// they dial in. Each connection is redialled after 1 s, 2 s, 4 s … 30 s
	// while it is down, and admits only the pinned server, as an accepted
	// connection does.
	Dial []string
	// DialFrom is the local IP dialled connections leave from (default:
	// the system's choice). With a static identity map on loopback it
	// tells machines apart (127.0.0.2, 127.0.0.3, …).
	DialFrom netip.Addr
	// DialRetryMin and DialRetryMax bound the redial delay (defaults 1 s
	// and 30 s).
	DialRetryMin, DialRetryMax time.Duration

	// Pin is the one server admitted (deny by default: everybody else, and
	// every whois failure, is disconnected before a byte is sent).
	Pin trust.Pin
	// Whois resolves a peer's address to its identity (tailscale whois, or
	// a static map for loopback tests).
	Whois identity.Whois

	// ServerKeys are the server keys the agent obeys (`pifleet-server key`
	// prints the server's). On every connection the server must prove it
	// holds one of them before the agent sends or processes anything but
	// its hello. Several keys: any of them (a key rotation in progress).
	ServerKeys []ed25519.PublicKey
	// TrustFirstServerKey, without ServerKeys, trusts the first key a
	// server proves and stores it (<StateDir>/server-keys); from then on
	// only that key is obeyed. Until that first connection, any process
	// on the pinned machine could be the one trusted: prefer ServerKeys.
	TrustFirstServerKey bool
	// AllowV1Server also accepts servers that prove no key (the TypeScript
	// pi-fleet): then any process on the pinned machine can command the
	// agent. The pin still applies; the agent warns at every start and
	// doctor reports it.
	AllowV1Server bool
	// HandshakeTimeout bounds the wait for the server's proof (default
	// 10 s): a late proof closes the connection.
	HandshakeTimeout time.Duration
	// BehindProxy says that the server reaches the agent through a TCP
	// proxy or NAT (the two sides see different addresses): the proofs
	// then cover the challenges, the direction and the names, but not the
	// TCP endpoints, so whoever runs the proxy could relay a handshake.
	BehindProxy bool

	// StateDir holds the agent's database (outbox, instance registry),
	// the bundle cache (under bundles/) and the shims' sockets.
	StateDir string
	// ResetCorruptState makes New move a corrupt agent.db (empty,
	// truncated, damaged, holding a record that does not decode) aside to
	// agent.db.corrupt-<time> and start with an empty one, losing its
	// instance records and unacknowledged task_done. Without it (the
	// default) New fails with an error matching ErrCorruptState and the
	// file is left untouched.
	ResetCorruptState bool
	// SessionsRoot is where pi writes sessions (default: pi's own,
	// ~/.pi/agent/sessions); each worker gets --session-dir under it.
	SessionsRoot string
	// CacheDir is the bundle cache root (default <StateDir>/bundles).
	CacheDir string
	// Registry is the bundle registry used when a spawn's env has no
	// PI_FLEET_SERVER.
	Registry string

	// PiCommand is the worker executable and leading arguments (default
	// ["pi"]); "--mode rpc" and the bundle's flags are appended.
	PiCommand []string
	// PiArgs are extra arguments appended to every worker command line.
	PiArgs []string
	// ShimCommand runs the shim (the agent binary's hidden "shim"
	// subcommand). Required to start workers.
	ShimCommand []string
	// Env is the workers' base environment (default os.Environ()).
	Env []string

	// MaxWorkers caps running workers (0: no cap).
	MaxWorkers int
	// FsAccess is workspace (default) or off.
	FsAccess FsAccess
	// DefaultModel is the machine's default model, used when neither the
	// spawn nor the bundle names one.
	DefaultModel *transport.ModelRef
	// EventRing is how many events per instance are kept for events_since
	// (default 4096).
	EventRing int
	// StopGrace is how long stop waits for a worker to end before killing
	// its process group (default 5 s).
	StopGrace time.Duration
	// DialogTimeout is how long a worker's dialog waits for an answer
	// before the safe default (default 5 min).
	DialogTimeout time.Duration
	// ReadyTimeout bounds the wait for a new worker's first get_state
	// answer (default 60 s).
	ReadyTimeout time.Duration
	// ProbeTimeout bounds the model probe (default 30 s).
	ProbeTimeout time.Duration
	// SessionsPoll is how often session files are polled for incremental
	// sessions_reports (default 10 s; negative: never).
	SessionsPoll time.Duration
	// OutboxRetryMin and OutboxRetryMax pace the re-sends of unacked
	// task_done frames (defaults 2 s and 60 s).
	OutboxRetryMin, OutboxRetryMax time.Duration

	// HeartbeatInterval and ExpiryTimeout tune every connection (defaults
	// 15 s and 45 s).
	HeartbeatInterval, ExpiryTimeout time.Duration
	// PeerQueueBytes is each connection's send budget: the encoded bytes
	// of events, reports and task_done frames that may wait for a server
	// that reads slowly (default 16 MiB). Events are never held back for
	// one connection: a connection that falls further behind is dropped
	// (closed, with the reason logged); the others get every event, and
	// the dropped server reconnects and catches up (events_since, the
	// task_done outbox, the exit notices).
	PeerQueueBytes int
	// MaxConnsPerIdentity caps the connections one identity (the machine
	// and user whois names) holds at once (default 8; negative: no cap).
	// A connection past the cap is refused after the handshake, logged.
	MaxConnsPerIdentity int
	// NoEventDelta sends every worker event whole, as to a TypeScript
	// server, even to a server that reads event_delta (see
	// docs/protocol.md): for comparing, or for a server whose rebuilt
	// events look wrong.
	NoEventDelta bool
	// NoTCPLiveness keeps the application's heartbeats both ways on every
	// connection. Without it, on Linux, a connection not behind a proxy
	// announces tcp-liveness in hello, and with a server that announces
	// it too (a pifleet one) the server sends no heartbeats and TCP
	// watches the connection instead of the receive expiry: a TCP user
	// timeout of ExpiryTimeout and keepalive probes every
	// HeartbeatInterval (docs/protocol.md). The agent's own heartbeats go
	// on. The cost: a server process that hangs while its machine's TCP
	// stack still answers is no longer noticed (redialling would reach
	// the same hung process anyway); a dead machine, a cut network or a
	// closed socket still are.
	NoTCPLiveness bool

	// ExecPolicy enables the exec plane: ExecOff (the default: every
	// exec_start is refused with exec_disabled) or ExecFull (hello then
	// announces exec-v1 and the pinned server may run commands here).
	ExecPolicy ExecPolicy
	// ExecRoots, when set, are the only directory trees commands may run
	// in.
	ExecRoots []string
	// MaxExecs caps running commands (default 4).
	MaxExecs int
	// ExecTimeout is a command's timeout when the server names none
	// (default 300 s; at most 3,600 s either way).
	ExecTimeout time.Duration
	// ExecAuditFile is the audit log of every command started and ended
	// (default <StateDir>/exec-audit.jsonl, mode 0600).
	ExecAuditFile string
	// DeliveryAuthorName and DeliveryAuthorEmail sign the commits that
	// deliver an isolated worker's work (default "pifleet" and
	// pifleet@<Machine>).
	DeliveryAuthorName, DeliveryAuthorEmail string
	// Git is the git executable for isolated workers (default "git").
	Git string

	// ExecShell runs shell-mode commands, the command appended (default
	// bash -lc, or sh -lc without bash).
	ExecShell []string

	// Version is hello's packageVersion (default: the module version from
	// the build information).
	Version string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the agent's log (default: disabled).
	Logger zerolog.Logger
}

// ErrConfig is matched by every configuration error.
var ErrConfig = errors.New("agent: invalid configuration")

// ErrCorruptState is matched by the error of New when agent.db exists but
// cannot be trusted (empty, truncated, damaged, or holding a record that
// does not decode); the error names the file and what to do (see
// Config.ResetCorruptState).
var ErrCorruptState = boltfile.ErrCorrupt

func (c Config) withDefaults() (Config, error) {
	if c.Pin.Machine == "" {
		return c, fmt.Errorf("%w: no pinned server (Pin)", ErrConfig)
	}
	if c.Whois == nil {
		return c, fmt.Errorf("%w: no Whois", ErrConfig)
	}
	if c.StateDir == "" {
		return c, fmt.Errorf("%w: no StateDir", ErrConfig)
	}
	if len(c.ServerKeys) == 0 && !c.TrustFirstServerKey && !c.AllowV1Server {
		return c, fmt.Errorf("%w: no trusted server key: give the server's key (--server-key, printed by `pifleet-server key`), "+
			"or ask for trust on first use (--trust-first-server-key), or accept servers without a key (--allow-v1-server, for a TypeScript server)", ErrConfig)
	}
	if abs, err := filepath.Abs(c.StateDir); err == nil {
		c.StateDir = abs
	}
	if c.Machine == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("%w: machine name: %v", ErrConfig, err)
		}
		c.Machine, _, _ = strings.Cut(h, ".")
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.Listen == "" && c.IPProvider == nil {
		ts := &identity.Tailscale{Log: c.Logger}
		c.IPProvider = ts.IPv4
	}
	var dial []string
	for _, addr := range c.Dial {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return c, fmt.Errorf("%w: Dial address %q: want HOST:PORT", ErrConfig, addr)
		}
		if !slices.Contains(dial, addr) { // one connection per address
			dial = append(dial, addr)
		}
	}
	c.Dial = dial
	if c.RebindInterval <= 0 {
		c.RebindInterval = DefaultRebindInterval
	}
	if c.SessionsRoot == "" {
		root, err := defaultSessionsRoot()
		if err != nil {
			return c, fmt.Errorf("%w: sessions root: %v", ErrConfig, err)
		}
		c.SessionsRoot = root
	}
	if c.CacheDir == "" {
		c.CacheDir = filepath.Join(c.StateDir, "bundles")
	}
	if len(c.PiCommand) == 0 {
		c.PiCommand = []string{"pi"}
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	if c.MaxWorkers < 0 {
		return c, fmt.Errorf("%w: MaxWorkers %d < 0", ErrConfig, c.MaxWorkers)
	}
	switch c.FsAccess {
	case "":
		c.FsAccess = fsservice.AccessWorkspace
	case fsservice.AccessWorkspace, fsservice.AccessOff:
	default:
		return c, fmt.Errorf("%w: FsAccess %q (workspace or off)", ErrConfig, c.FsAccess)
	}
	if c.EventRing <= 0 {
		c.EventRing = DefaultEventRing
	}
	if c.StopGrace <= 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.DialogTimeout <= 0 {
		c.DialogTimeout = DefaultDialogTimeout
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.SessionsPoll == 0 {
		c.SessionsPoll = DefaultSessionsPoll
	}
	if c.PeerQueueBytes < 0 {
		return c, fmt.Errorf("%w: PeerQueueBytes %d < 0", ErrConfig, c.PeerQueueBytes)
	}
	if c.PeerQueueBytes == 0 {
		c.PeerQueueBytes = DefaultPeerQueueBytes
	}
	if c.MaxConnsPerIdentity == 0 {
		c.MaxConnsPerIdentity = DefaultMaxConnsPerIdentity
	}
	if c.OutboxRetryMin <= 0 {
		c.OutboxRetryMin = 2 * time.Second
	}
	if c.OutboxRetryMax <= 0 {
		c.OutboxRetryMax = 60 * time.Second
	}
	switch c.ExecPolicy {
	case "":
		c.ExecPolicy = ExecOff
	case ExecOff, ExecFull:
	default:
		return c, fmt.Errorf("%w: ExecPolicy %q (off or full)", ErrConfig, c.ExecPolicy)
	}
	if c.MaxExecs < 0 {
		return c, fmt.Errorf("%w: MaxExecs %d < 0", ErrConfig, c.MaxExecs)
	}
	if c.ExecTimeout < 0 {
		return c, fmt.Errorf("%w: ExecTimeout %v < 0", ErrConfig, c.ExecTimeout)
	}
	for _, r := range c.ExecRoots {
		if !filepath.IsAbs(r) {
			return c, fmt.Errorf("%w: exec root %q is not an absolute path", ErrConfig, r)
		}
	}
	if c.DeliveryAuthorName == "" {
		c.DeliveryAuthorName = "pifleet"
	}
	if c.DeliveryAuthorEmail == "" {
		c.DeliveryAuthorEmail = "pifleet@" + c.Machine
	}
	if c.ExecAuditFile == "" {
		c.ExecAuditFile = filepath.Join(c.StateDir, "exec-audit.jsonl")
	}
	if c.Version == "" {
		c.Version = ModuleVersion()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// defaultSessionsRoot is pi's: $PI_CODING_AGENT_DIR/sessions, else
// ~/.pi/agent/sessions.
func defaultSessionsRoot() (string, error) {
	if d := os.Getenv("PI_CODING_AGENT_DIR"); d != "" {
		return filepath.Join(d, "sessions"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".pi", "agent", "sessions"), nil
}

// Platform is this machine's platform in Node's names (hello.platform).
func Platform() string { return bundle.HostPlatform() }
