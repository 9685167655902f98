package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// ServeCmd runs the agent daemon.
type ServeCmd struct {
	Listen              string   `help:"Listen on this address (host:port). Default: the tailscale IPv4 on --port, re-bound when it changes. Never all interfaces unless given explicitly (e.g. 0.0.0.0:9788)." env:"PIFLEET_AGENT_LISTEN"`
	Port                int      `help:"Port used with the tailscale address." default:"9788" env:"PIFLEET_PORT"`
	Server              string   `help:"The pinned server's machine name (MACHINE or MACHINE/USER): nobody else is admitted." required:"" env:"PIFLEET_SERVER"`
	ServerUser          string   `help:"Also require this tailnet user of the pinned server." env:"PIFLEET_SERVER_USER"`
	Dial                []string `help:"Also keep a connection to a server that accepts agents at this address (its --inbound), redialled after 1 s, 2 s, 4 s … 30 s while down; only the pinned server is admitted. Repeatable." env:"PIFLEET_DIAL" sep:"," placeholder:"HOST:PORT"`
	DialFrom            string   `help:"Local IP the --dial connections leave from (default: the system's choice)." env:"PIFLEET_DIAL_FROM" placeholder:"IP"`
	WhoisStatic         []string `help:"Static identity map IP=MACHINE[/USER] instead of tailscale whois (loopback testing only)." env:"PIFLEET_WHOIS_STATIC" sep:","`
	Machine             string   `help:"Machine name announced in hello (default: the short host name)." env:"PIFLEET_MACHINE"`
	StateDir            string   `help:"State directory (database, bundle cache, shim sockets)." default:"${default_state_dir}" env:"PIFLEET_AGENT_STATE_DIR" type:"path"`
	ResetState          bool     `help:"When agent.db in the state directory is corrupt (empty, truncated, damaged), move it aside to agent.db.corrupt-<time> and start with an empty state, losing its worker records and unacknowledged task reports. Without it such a file stops the agent with an error. A sound file is never touched." env:"PIFLEET_AGENT_RESET_STATE"`
	Sessions            string   `help:"pi's sessions root (default: $PI_CODING_AGENT_DIR/sessions or ~/.pi/agent/sessions)." env:"PIFLEET_SESSIONS_ROOT" type:"path"`
	Pi                  string   `help:"The pi executable." default:"pi" env:"PIFLEET_PI"`
	PiArg               []string `help:"Extra argument for every worker's pi command line (repeatable)." env:"PIFLEET_PI_ARGS" sep:"none"`
	MaxWorkers          int      `help:"Refuse spawns beyond this many running workers (0: no limit)." default:"0" env:"PIFLEET_MAX_WORKERS"`
	PeerQueue           string   `help:"How far one server connection may fall behind the events sent to it, in bytes (K, M, G suffixes): past it the connection is dropped, never held up for, and the server reconnects and catches up." default:"16M" env:"PIFLEET_PEER_QUEUE" placeholder:"BYTES"`
	MaxConnsPerIdentity int      `help:"Most connections one identity (machine and user) may hold open at once; more are refused (-1: no cap)." default:"8" env:"PIFLEET_MAX_CONNS_PER_IDENTITY"`
	NoEventDelta        bool     `help:"Send streamed output whole, every chunk with the whole message so far, even to a server that takes it as small updates." env:"PIFLEET_NO_EVENT_DELTA"`
	NoTCPLiveness       bool     `help:"Keep heartbeats both ways even with a server that lets TCP watch the connection instead (tcp-liveness); with them, a server process that hangs while its machine still answers is noticed too." env:"PIFLEET_NO_TCP_LIVENESS"`
	FsAccess            string   `help:"File service: workspace (read-only, inside each worker's cwd) or off." default:"workspace" enum:"workspace,off" env:"PIFLEET_FS_ACCESS"`
	Registry            string   `help:"Bundle registry URL used when a spawn does not name one (PI_FLEET_SERVER)." env:"PIFLEET_REGISTRY_URL"`
	Model               string   `help:"Machine default model PROVIDER/ID[:THINKING], used when neither spawn nor bundle names one." env:"PIFLEET_MODEL"`

	KeyFlags  `embed:""`
	ExecFlags `embed:""`

	DeliveryAuthorName  string `help:"Author of the commits that deliver an isolated worker's work (default: pifleet)." env:"PIFLEET_DELIVERY_AUTHOR_NAME"`
	DeliveryAuthorEmail string `help:"Its email (default: pifleet@MACHINE)." env:"PIFLEET_DELIVERY_AUTHOR_EMAIL"`
	Git                 string `help:"The git executable for isolated workers' worktrees." default:"git" env:"PIFLEET_GIT"`
}

// KeyFlags say which server the agent obeys beyond the pin: the holder of
// a key.
type KeyFlags struct {
	ServerKey           []string `help:"The server key to obey (ed25519:…, printed by 'pifleet-server key' on the server). Every connection must prove it before the agent does anything. Repeatable; any of them is accepted (during a key rotation)." env:"PIFLEET_SERVER_KEY" sep:","`
	TrustFirstServerKey bool     `help:"Without --server-key: trust the key the first server proves, store it in the state directory, and obey only that key afterwards (until then any process on the pinned machine could be the one trusted)." env:"PIFLEET_TRUST_FIRST_SERVER_KEY"`
	AllowV1Server       bool     `name:"allow-v1-server" help:"Also accept servers that prove no key (the TypeScript pi-fleet). Then ANY process on the pinned machine can command this agent; the pin still applies." env:"PIFLEET_ALLOW_V1_SERVER"`
	BehindProxy         bool     `help:"The server reaches this agent through a TCP proxy or NAT (the two see different addresses): the key proof then does not cover the TCP addresses, so whoever runs the proxy could relay a connection." env:"PIFLEET_BEHIND_PROXY"`
}

// keys parses --server-key and refuses a setup in which the agent would
// obey nobody.
func (k KeyFlags) keys() ([]ed25519.PublicKey, error) {
	keys, err := auth.ParsePublicKeys(strings.Join(k.ServerKey, ","))
	if err != nil {
		return nil, fmt.Errorf("--server-key: %w", err)
	}
	if len(keys) == 0 && !k.TrustFirstServerKey && !k.AllowV1Server {
		return nil, errors.New("no server key: give --server-key (run 'pifleet-server key' on the server), or --trust-first-server-key, or --allow-v1-server for a TypeScript server")
	}
	return keys, nil
}

// apply copies the flags into cfg.
func (k KeyFlags) apply(cfg *agent.Config) error {
	keys, err := k.keys()
	if err != nil {
		return err
	}
	cfg.ServerKeys, cfg.TrustFirstServerKey, cfg.AllowV1Server, cfg.BehindProxy = keys, k.TrustFirstServerKey, k.AllowV1Server, k.BehindProxy
	return nil
}

// args are the flags as a serve command line (for a service definition).
func (k KeyFlags) args() []string {
	var out []string
	for _, key := range k.ServerKey {
		out = append(out, "--server-key", key)
	}
	if k.TrustFirstServerKey {
		out = append(out, "--trust-first-server-key")
	}
	if k.AllowV1Server {
		out = append(out, "--allow-v1-server")
	}
	if k.BehindProxy {
		out = append(out, "--behind-proxy")
	}
	return out
}

// ExecFlags configure the exec plane: the pinned server running commands
// (tests, builds) on this machine without a model turn.
type ExecFlags struct {
	ExecPolicy    string   `help:"Let the pinned server run commands here: off (default) or full. Every command is logged to the audit file." default:"off" enum:"off,full" env:"PIFLEET_EXEC_POLICY"`
	ExecRoot      []string `help:"Only run commands in this directory tree (repeatable; default: anywhere)." env:"PIFLEET_EXEC_ROOTS" sep:"none" type:"path"`
	MaxExecs      int      `help:"Commands running at once, at most." default:"4" env:"PIFLEET_MAX_EXECS"`
	ExecTimeout   int      `help:"Timeout in seconds of a command when the server names none (at most 3600)." default:"300" env:"PIFLEET_EXEC_TIMEOUT"`
	ExecAuditFile string   `help:"Audit log of every command run (default: exec-audit.jsonl in the state directory; mode 0600)." env:"PIFLEET_EXEC_AUDIT_FILE" type:"path"`
}

// apply copies the flags into cfg.
func (e ExecFlags) apply(cfg *agent.Config) {
	cfg.ExecPolicy = agent.ExecPolicy(e.ExecPolicy)
	cfg.ExecRoots = e.ExecRoot
	cfg.MaxExecs = e.MaxExecs
	cfg.ExecTimeout = time.Duration(e.ExecTimeout) * time.Second
	cfg.ExecAuditFile = e.ExecAuditFile
}

// args are the flags as a serve command line (for a service definition),
// in the order --exec-policy, --exec-root…, --max-execs, --exec-timeout,
// --exec-audit-file; nothing when exec is off.
func (e ExecFlags) args() []string {
	if e.ExecPolicy != string(agent.ExecFull) {
		return nil
	}
	out := []string{"--exec-policy", e.ExecPolicy}
	for _, r := range e.ExecRoot {
		out = append(out, "--exec-root", r)
	}
	out = append(out, "--max-execs", strconv.Itoa(e.MaxExecs))
	out = append(out, "--exec-timeout", strconv.Itoa(e.ExecTimeout))
	if e.ExecAuditFile != "" {
		out = append(out, "--exec-audit-file", e.ExecAuditFile)
	}
	return out
}

// Run serves until SIGINT or SIGTERM; workers keep running under their
// shims and the next agent re-adopts them.
func (c *ServeCmd) Run(log zerolog.Logger, out *Output) error {
	cfg, err := c.config(log, out)
	if err != nil {
		return err
	}
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go onSignals(sigs, done, cancel, func(code int) { os.Exit(code) }, log)
	runErr := a.Run(ctx)
	closeErr := a.Close()
	if runErr != nil {
		return runErr
	}
	return closeErr
}

// onSignals ends the agent on the first SIGINT or SIGTERM (cancel: Run
// returns at once, the workers keep running under their shims), and
// exits at once on a second one, without waiting for the shutdown to end.
// done closes when the agent has shut down.
func onSignals(sigs <-chan os.Signal, done <-chan struct{}, cancel func(), exit func(int), log zerolog.Logger) {
	select {
	case s := <-sigs:
		log.Info().Stringer("signal", s).Msg("shutting down; the workers keep running for the next agent (a second signal exits at once)")
		cancel()
	case <-done:
		return
	}
	select {
	case s := <-sigs:
		log.Warn().Stringer("signal", s).Msg("second signal: exiting now")
		code := 1
		if n, ok := s.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		exit(code)
	case <-done:
	}
}

func (c *ServeCmd) config(log zerolog.Logger, out *Output) (agent.Config, error) {
	pin, err := trust.ParsePin(c.Server)
	if err != nil {
		return agent.Config{}, err
	}
	if c.ServerUser != "" {
		pin.User = c.ServerUser
	}
	cfg := agent.Config{
		Machine:           c.Machine,
		Listen:            c.Listen,
		Port:              c.Port,
		Pin:               pin,
		Dial:              c.Dial,
		StateDir:          c.StateDir,
		ResetCorruptState: c.ResetState,
		SessionsRoot:      c.Sessions,
		Registry:          c.Registry,
		PiCommand:         []string{c.Pi},
		PiArgs:            c.PiArg,
		MaxWorkers:        c.MaxWorkers,
		FsAccess:          agent.FsAccess(c.FsAccess),
		Logger:            log,

		MaxConnsPerIdentity: c.MaxConnsPerIdentity,
		NoEventDelta:        c.NoEventDelta,
		NoTCPLiveness:       c.NoTCPLiveness,
	}
	if c.PeerQueue != "" {
		n, err := parseBytes(c.PeerQueue)
		if err != nil {
			return cfg, fmt.Errorf("--peer-queue %q: %w", c.PeerQueue, err)
		}
		cfg.PeerQueueBytes = n
	}
	if c.DialFrom != "" {
		ip, err := netip.ParseAddr(c.DialFrom)
		if err != nil {
			return cfg, fmt.Errorf("--dial-from %q: not an IP address", c.DialFrom)
		}
		cfg.DialFrom = ip
	}
	if err := c.KeyFlags.apply(&cfg); err != nil {
		return cfg, err
	}
	c.ExecFlags.apply(&cfg)
	cfg.DeliveryAuthorName, cfg.DeliveryAuthorEmail, cfg.Git = c.DeliveryAuthorName, c.DeliveryAuthorEmail, c.Git
	exe, err := os.Executable()
	if err != nil {
		return cfg, fmt.Errorf("locating this binary for the shim: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return cfg, err
	}
	cfg.ShimCommand = []string{exe, "shim"}
	if c.Model != "" {
		m, err := parseModelFlag(c.Model)
		if err != nil {
			return cfg, err
		}
		cfg.DefaultModel = &m
	}
	if c.AllowV1Server {
		fmt.Fprintf(out.Err, "\n*** WARNING: SERVERS WITHOUT A KEY PROOF ARE ACCEPTED (--allow-v1-server) ***\n"+
			"*** Any process on %s can command this agent and its workers. ***\n\n", pin.Machine)
		log.Warn().Str("server", pin.String()).Msg("SERVERS WITHOUT A KEY PROOF ARE ACCEPTED (--allow-v1-server): any process on the pinned machine can command this agent")
	}
	if len(c.WhoisStatic) > 0 {
		st, err := identity.ParseStatic(c.WhoisStatic...)
		if err != nil {
			return cfg, err
		}
		cfg.Whois = st
		fmt.Fprintf(out.Err, "\n*** WARNING: STATIC IDENTITY MAP IN FORCE (%s) ***\n"+
			"*** Peers are NOT identified by tailscale whois. For loopback testing only. ***\n\n",
			strings.Join(st.Entries(), ", "))
		log.Warn().Strs("entries", st.Entries()).Msg("STATIC IDENTITY MAP IN FORCE: peers are not identified by tailscale whois")
	} else {
		ts := &identity.Tailscale{Log: log}
		cfg.Whois = ts
		if c.Listen == "" {
			cfg.IPProvider = ts.IPv4
		}
	}
	return cfg, nil
}

// parseModelFlag reads PROVIDER/ID[:THINKING].
func parseModelFlag(s string) (transport.ModelRef, error) {
	rest, thinking, _ := strings.Cut(s, ":")
	p, id, ok := strings.Cut(rest, "/")
	if !ok || p == "" || id == "" {
		return transport.ModelRef{}, fmt.Errorf("--model %q: want PROVIDER/ID[:THINKING]", s)
	}
	return transport.ModelRef{Provider: p, ID: id, Thinking: thinking}, nil
}

// defaultStateDir is ~/.local/state/pifleet-agent (or the OS equivalent).
func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "pifleet-agent")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".pifleet-agent"
	}
	return filepath.Join(home, ".local", "state", "pifleet-agent")
}

// parseBytes reads a size: a positive number of bytes, with an optional
// K, M or G suffix (powers of 1024).
func parseBytes(s string) (int, error) {
	mult := 1
	num := strings.TrimSpace(s)
	if num != "" {
		switch strings.ToUpper(num[len(num)-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		}
		if mult > 1 {
			num = num[:len(num)-1]
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || n > math.MaxInt/mult {
		return 0, errors.New("want a positive size in bytes, like 16M or 65536")
	}
	return n * mult, nil
}
