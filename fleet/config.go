package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/dialer"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// Defaults of Config.
const (
	// DefaultAgentPort is the port an agent listens on; tailnet peers are
	// dialled there.
	DefaultAgentPort = 9788
	// DefaultHelloTimeout bounds the wait for an agent's hello.
	DefaultHelloTimeout = 10 * time.Second
	// DefaultSpawnTimeout bounds a spawn, provisioning included (a cold
	// sync of a large bundle takes tens of seconds).
	DefaultSpawnTimeout = 5 * time.Minute
	// DefaultTailnetInterval is how often tailnet peers are rediscovered.
	DefaultTailnetInterval = time.Minute
	// DefaultTailBuffer is how many recent events each instance keeps for
	// Output.
	DefaultTailBuffer = 300
	// DefaultMirrorDelay is Config.MirrorDelay's default.
	DefaultMirrorDelay = time.Second
	// DefaultAbortTimeout is Config.AbortTimeout's default.
	DefaultAbortTimeout = 30 * time.Second
)

// Agent is one entry of the directory of agents: a name (the one Spawn
// and Status use) and the addresses ("host:port") it is dialled at.
type Agent struct {
	Name      string
	Addresses []string
}

// ParseAgent reads a directory entry written NAME=HOST:PORT[,HOST:PORT…]
// (the --agent flag of pifleet-server); spaces around the name and each
// address are ignored.
func ParseAgent(s string) (Agent, error) {
	name, addrs, ok := strings.Cut(s, "=")
	name, addrs = strings.TrimSpace(name), strings.TrimSpace(addrs)
	if !ok || name == "" || addrs == "" {
		return Agent{}, &ConfigError{Field: "agent", Reason: fmt.Sprintf("%q is not NAME=HOST:PORT", s)}
	}
	a := Agent{Name: name}
	for _, addr := range strings.Split(addrs, ",") {
		addr = strings.TrimSpace(addr)
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return Agent{}, &ConfigError{Field: "agent", Reason: fmt.Sprintf("%q: address %q: %v", s, addr, err)}
		}
		a.Addresses = append(a.Addresses, addr)
	}
	return a, nil
}

// Tailnet lists the machines of the tailnet; *identity.Tailscale is the
// real one (`tailscale status --json`).
type Tailnet interface {
	Status(ctx context.Context) (identity.Status, error)
}

// Config is everything a Fleet is made of. New starts from defaults and
// applies Options; every field is documented with its default.
type Config struct {
	// StateDir holds the server's bbolt state file and its key pair
	// (required).
	StateDir string
	// ResetCorruptState makes New move a corrupt state file (empty,
	// truncated, damaged, holding a record that does not decode) aside to
	// server.db.corrupt-<time> and start with an empty one, losing its
	// tasks, trust decisions and undelivered task_done. Without it (the
	// default) New fails with an error matching ErrCorruptState and the
	// file is left untouched.
	ResetCorruptState bool
	// KeyFile is the server's private key file (default
	// <StateDir>/server.key, created with mode 0600 by New when absent).
	// Every connection to an agent proves it; it is read again for each
	// handshake, so that a rotation (auth.Rotate, `pifleet-server key
	// rotate`) takes effect without a restart.
	KeyFile string
	// RegistryRoot is the bundle registry directory: Spawn reads a bundle's
	// manifest there for the platform check and maxRejects, and the
	// registry HTTP server serves it (required for Spawn).
	RegistryRoot string
	// RegistryListen, when set, is where Start serves the registry over
	// HTTP ("127.0.0.1:9787"; port 0 picks one). Empty: no listener
	// (serve Fleet.RegistryHandler yourself).
	RegistryListen string
	// RegistryURL is the registry URL agents are told to fetch from
	// (spawn env PI_FLEET_SERVER). Default: http://<RegistryListen's
	// actual address>.
	RegistryURL string
	// Agents is the static directory.
	Agents []Agent
	// Tailnet, when set, adds every online tailnet peer as an agent named
	// by its machine name, dialled at its IPv4 and TailnetPort, re-read
	// every TailnetInterval.
	Tailnet         Tailnet
	TailnetPort     int
	TailnetInterval time.Duration
	// InboundListen, when set, accepts agents that dial in; each passes
	// first-contact trust before any frame is read.
	InboundListen string
	// Whois identifies peers. Inbound connections need it; a dialled
	// agent's address is checked with it too when it is set. Without it a
	// dialled agent is known by the machine of its hello.
	Whois identity.Whois
	// Prompter answers first contact for a machine without a stored trust
	// decision. Without one, unknown machines are refused.
	Prompter trust.Prompter
	// Logger receives everything (default zerolog.Nop()).
	Logger zerolog.Logger
	// HelloTimeout bounds the wait for an agent's hello (default 10 s).
	HelloTimeout time.Duration
	// ConnectTimeout bounds one TCP dial (default 10 s).
	ConnectTimeout time.Duration
	// SpawnTimeout bounds a spawn (default 5 min).
	SpawnTimeout time.Duration
	// AbortTimeout bounds aborting (default 30 s): an abort whose run has
	// not settled by then did not take, and the instance is running again
	// (Stop ends it).
	AbortTimeout time.Duration
	// Conn configures every agent connection (heartbeat 15 s, expiry
	// 45 s, request timeout 60 s by default).
	Conn transport.Options
	// NoTCPLiveness keeps the server's heartbeats to every agent: its
	// hello does not announce tcp-liveness. Without it, an agent that
	// announced it (a pifleet agent on Linux, not behind a proxy) gets no
	// heartbeats from the server and lets TCP watch the connection; the
	// server still expects the agent's heartbeats and expires the
	// connection without them, as before (docs/protocol.md).
	NoTCPLiveness bool
	// EveryUpdate has pifleet agents send each streamed update of a
	// worker's answer: the server's hello does not announce
	// event-coalesce. Without it, the updates of a text that an agent
	// gathers for one frame (at most 10 ms of them) reach the server as
	// one: the last, its delta the gathered deltas joined, so a listener
	// that appends every delta still has the whole text, and the server
	// handles one update per frame instead of one per chunk
	// (docs/protocol.md).
	EveryUpdate bool
	// Dialer decides when agents are dialled. The default is the dialer's
	// with the reconnect schedule: MinRetryInterval 1 s, MaxRetryInterval
	// 30 s, factor 2, and DialDelay 0, so a fleet dials its agents at once.
	Dialer dialer.Config
	// TailBuffer is how many recent events each instance keeps (default
	// 300).
	TailBuffer int
	// MirrorDelay is how long after a worker settles the new entries of
	// its session are mirrored (default 1 s): the settles of a busy
	// worker within it share one catch-up, off the prompt's path. A
	// reconnect or a stop catches up at once.
	MirrorDelay time.Duration
	// OnTaskDone is told of every task_done at least once, on one
	// goroutine, in receipt order (the package documentation, "Task_done
	// delivery"). It is told of a report again, with the same
	// TaskReport.Key, only after the server process ended between the
	// call's start and the fleet's record of its return; an application
	// that must act exactly once records the key with the report's effect
	// and skips a key it has seen.
	OnTaskDone func(TaskReport)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Rand mints task and trace ids (default: seeded unpredictably).
	Rand *rand.Rand
}

// Option changes the Config of New.
type Option func(*Config)

// WithKeyFile sets Config.KeyFile.
func WithKeyFile(path string) Option { return func(c *Config) { c.KeyFile = path } }

// WithStateDir sets Config.StateDir.
func WithStateDir(dir string) Option { return func(c *Config) { c.StateDir = dir } }

// WithResetCorruptState sets Config.ResetCorruptState.
func WithResetCorruptState(on bool) Option { return func(c *Config) { c.ResetCorruptState = on } }

// WithRegistry sets Config.RegistryRoot and Config.RegistryListen.
func WithRegistry(root, listen string) Option {
	return func(c *Config) { c.RegistryRoot, c.RegistryListen = root, listen }
}

// WithRegistryURL sets Config.RegistryURL: the URL agents fetch bundles
// from when it is not the listener's own address (a proxy, a tailnet name).
func WithRegistryURL(url string) Option { return func(c *Config) { c.RegistryURL = url } }

// WithAgents adds entries to the static directory.
func WithAgents(agents ...Agent) Option {
	return func(c *Config) { c.Agents = append(c.Agents, agents...) }
}

// WithTailnet discovers agents among the tailnet's peers.
func WithTailnet(t Tailnet) Option { return func(c *Config) { c.Tailnet = t } }

// WithTailnetPort sets Config.TailnetPort, the port tailnet peers are
// dialled at (default DefaultAgentPort).
func WithTailnetPort(port int) Option { return func(c *Config) { c.TailnetPort = port } }

// WithTailnetInterval sets Config.TailnetInterval, how often tailnet peers
// are rediscovered (default DefaultTailnetInterval).
func WithTailnetInterval(d time.Duration) Option { return func(c *Config) { c.TailnetInterval = d } }

// WithInbound accepts agents that dial in at addr.
func WithInbound(addr string) Option { return func(c *Config) { c.InboundListen = addr } }

// WithWhois sets Config.Whois.
func WithWhois(w identity.Whois) Option { return func(c *Config) { c.Whois = w } }

// WithPrompter sets Config.Prompter.
func WithPrompter(p trust.Prompter) Option { return func(c *Config) { c.Prompter = p } }

// WithLogger sets Config.Logger.
func WithLogger(l zerolog.Logger) Option { return func(c *Config) { c.Logger = l } }

// WithTaskDone sets Config.OnTaskDone.
func WithTaskDone(fn func(TaskReport)) Option { return func(c *Config) { c.OnTaskDone = fn } }

// WithHelloTimeout sets Config.HelloTimeout.
func WithHelloTimeout(d time.Duration) Option { return func(c *Config) { c.HelloTimeout = d } }

// WithConnectTimeout sets Config.ConnectTimeout.
func WithConnectTimeout(d time.Duration) Option { return func(c *Config) { c.ConnectTimeout = d } }

// WithSpawnTimeout sets Config.SpawnTimeout.
func WithSpawnTimeout(d time.Duration) Option { return func(c *Config) { c.SpawnTimeout = d } }

// WithConnOptions sets Config.Conn, the options of every agent connection.
func WithConnOptions(o transport.Options) Option { return func(c *Config) { c.Conn = o } }

// WithNoTCPLiveness sets Config.NoTCPLiveness: heartbeats to every agent,
// as a TypeScript server sends them.
func WithNoTCPLiveness() Option { return func(c *Config) { c.NoTCPLiveness = true } }

// WithEveryUpdate sets Config.EveryUpdate: every streamed update of a
// worker's answer reaches the server, none joined.
func WithEveryUpdate() Option { return func(c *Config) { c.EveryUpdate = true } }

// WithDialer sets Config.Dialer, the schedule agents are dialled on.
func WithDialer(d dialer.Config) Option { return func(c *Config) { c.Dialer = d } }

// WithTailBuffer sets Config.TailBuffer.
func WithTailBuffer(n int) Option { return func(c *Config) { c.TailBuffer = n } }

// WithMirrorDelay sets Config.MirrorDelay.
func WithMirrorDelay(d time.Duration) Option { return func(c *Config) { c.MirrorDelay = d } }

// WithClock sets Config.Now.
func WithClock(now func() time.Time) Option { return func(c *Config) { c.Now = now } }

// WithRand sets Config.Rand.
func WithRand(r *rand.Rand) Option { return func(c *Config) { c.Rand = r } }

// DefaultDialerConfig is the dialer configuration a fleet uses unless told
// otherwise: the reconnect schedule (1 s, 2 s, 4 s … 30 s; the dialer adds
// its ±0.5 jitter to the factor), no initial delay, and the first dials of
// the agents a server starts with 1 ms apart with up to 32 in flight, so
// that it reaches 10,000 agents in seconds rather than minutes.
func DefaultDialerConfig() dialer.Config {
	c := dialer.DefaultConfig()
	c.MinRetryInterval = time.Second
	c.MaxRetryInterval = 30 * time.Second
	c.RetryBackoffFactor = 2
	c.DialDelay = 0
	// The dialer's own 50 ms spread caps a boot at 20 agents a second
	// (8 minutes for 10,000). A handshake's wait is the network and the
	// trust store's fsync, shared by concurrent first contacts: more in
	// flight is what makes them fast. The queue holds what falls due
	// faster than the handshakes complete: a dial the queue cannot take
	// is backed off as if it had failed, and at 10,000 agents that is
	// most of them, retried again and again.
	c.ScanSpread = time.Millisecond
	c.PoolSize = 32
	c.QueueSize = 16384
	return c
}

func defaultConfig() Config {
	return Config{
		TailnetPort:     DefaultAgentPort,
		TailnetInterval: DefaultTailnetInterval,
		Logger:          zerolog.Nop(),
		HelloTimeout:    DefaultHelloTimeout,
		ConnectTimeout:  transport.DefaultConnectTimeout,
		SpawnTimeout:    DefaultSpawnTimeout,
		AbortTimeout:    DefaultAbortTimeout,
		Dialer:          DefaultDialerConfig(),
		TailBuffer:      DefaultTailBuffer,
		MirrorDelay:     DefaultMirrorDelay,
		Now:             time.Now,
	}
}

func (c *Config) validate() error {
	switch {
	case c.StateDir == "":
		return &ConfigError{Field: "StateDir", Reason: "empty"}
	case c.HelloTimeout <= 0:
		return &ConfigError{Field: "HelloTimeout", Reason: "must be positive"}
	case c.ConnectTimeout <= 0:
		return &ConfigError{Field: "ConnectTimeout", Reason: "must be positive"}
	case c.SpawnTimeout <= 0:
		return &ConfigError{Field: "SpawnTimeout", Reason: "must be positive"}
	case c.AbortTimeout <= 0:
		return &ConfigError{Field: "AbortTimeout", Reason: "must be positive"}
	case c.TailBuffer < 1:
		return &ConfigError{Field: "TailBuffer", Reason: "must be at least 1"}
	case c.Tailnet != nil && c.TailnetInterval <= 0:
		return &ConfigError{Field: "TailnetInterval", Reason: "must be positive"}
	case c.Tailnet != nil && (c.TailnetPort < 1 || c.TailnetPort > 65535):
		return &ConfigError{Field: "TailnetPort", Reason: fmt.Sprintf("%d is not a port", c.TailnetPort)}
	case c.InboundListen != "" && c.Whois == nil:
		return &ConfigError{Field: "Whois", Reason: "inbound agents need a whois"}
	}
	seen := map[string]bool{}
	for _, a := range c.Agents {
		if a.Name == "" || len(a.Addresses) == 0 {
			return &ConfigError{Field: "Agents", Reason: fmt.Sprintf("entry %+v needs a name and an address", a)}
		}
		if seen[a.Name] {
			return &ConfigError{Field: "Agents", Reason: fmt.Sprintf("%q listed twice", a.Name)}
		}
		seen[a.Name] = true
	}
	if err := c.Dialer.Validate(); err != nil {
		return fmt.Errorf("%w: dialer: %w", ErrInvalidConfig, err)
	}
	return nil
}
