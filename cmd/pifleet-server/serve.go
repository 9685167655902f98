package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/catalog"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/fleet/controlapi/webui"
	"example.com/pifleet/internal/cli"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// DefaultRegistryPort is the registry's port when --listen is not given.
const DefaultRegistryPort = 9787

// ServeCmd is `serve`: the fleet, the bundle registry and the control
// API in one process.
type ServeCmd struct {
	StateDir       string   `help:"State directory: the fleet's database, the control socket and token." default:"${default_state_dir}" env:"PIFLEET_STATE_DIR" type:"path"`
	ResetState     bool     `help:"When server.db in the state directory is corrupt (empty, truncated, damaged), move it aside to server.db.corrupt-<time> and start with an empty state, losing its tasks, trust decisions and undelivered task reports. Without it such a file stops the server with an error. A sound file is never touched." env:"PIFLEET_SERVER_RESET_STATE"`
	Registry       string   `help:"Registry root directory to serve." default:"${default_registry}" type:"path" env:"PIFLEET_REGISTRY"`
	Listen         string   `help:"Bundle registry HTTP address. Default: the tailscale IPv4 on port 9787 (127.0.0.1:9787 with --whois-static); never all interfaces unless given (0.0.0.0:9787)." env:"PIFLEET_REGISTRY_LISTEN" placeholder:"ADDR"`
	RegistryURL    string   `help:"URL agents fetch bundles from. Default: http:// and the registry's address." env:"PIFLEET_REGISTRY_URL" placeholder:"URL"`
	Agent          []string `help:"An agent to dial: NAME=HOST:PORT[,HOST:PORT…]. Repeat the flag (or separate with ';' in the variable)." env:"PIFLEET_AGENTS" sep:";" placeholder:"NAME=HOST:PORT"`
	Tailnet        bool     `help:"Also dial every online tailnet peer, named by its machine name." env:"PIFLEET_TAILNET"`
	TailnetPort    int      `help:"Port tailnet peers are dialled at." default:"9788" env:"PIFLEET_TAILNET_PORT"`
	Trust          []string `help:"Pre-approve a machine before any agent connects: NAME=POLICY (allow, steer or deny), stored like trust set. Repeat the flag (or separate with ';' in the variable). A headless server refuses machines it has no decision for." env:"PIFLEET_TRUST" sep:";" placeholder:"NAME=POLICY"`
	Inbound        string   `help:"Accept agents that dial in at this address (they pass first-contact trust)." env:"PIFLEET_INBOUND" placeholder:"ADDR"`
	WhoisStatic    []string `help:"Static identity map IP=MACHINE[/USER],… instead of tailscale whois: for loopback development and tests only." env:"PIFLEET_WHOIS_STATIC" sep:"," placeholder:"IP=MACHINE"`
	Tailscale      string   `help:"The tailscale CLI (default: looked up)." env:"PIFLEET_TAILSCALE" placeholder:"PATH"`
	API            string   `help:"Control API address: unix:PATH or 127.0.0.1:PORT (TCP requires the bearer token the server writes beside the socket). Default: unix:<state-dir>/control.sock." env:"PIFLEET_API" placeholder:"ADDR"`
	APIAllowRemote bool     `help:"Allow --api outside loopback (the token is then the only guard)." env:"PIFLEET_API_ALLOW_REMOTE"`
	UI             string   `help:"Serve the web page at this address, e.g. 127.0.0.1:9791 (a bare :PORT means loopback); open it with pifleet-server ui." env:"PIFLEET_UI" placeholder:"ADDR"`
	UIAllowRemote  bool     `help:"Allow --ui outside loopback (the one-time login and the session cookie are then the only guard; put TLS in front)." env:"PIFLEET_UI_ALLOW_REMOTE"`
	EveryUpdate    bool     `help:"Hand watchers every streamed update of a worker's answer. By default the chunks of text a pifleet agent gathers for up to 10 ms come as one update, whose delta holds them all." env:"PIFLEET_EVERY_UPDATE"`
}

// served is what a running serve reports once it accepts requests.
type served struct {
	API      controlapi.Addr
	Registry string
	// UI is the web page's URL, when --ui is set.
	UI string
}

// Run serves until SIGINT or SIGTERM.
func (c *ServeCmd) Run(log zerolog.Logger) error {
	ctx, cancel := signalContext()
	defer cancel()
	return c.serve(ctx, log, nil)
}

// serve runs until ctx ends; ready, when set, is told the addresses once
// everything listens.
func (c *ServeCmd) serve(ctx context.Context, log zerolog.Logger, ready func(served)) error {
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return err
	}
	apiAddr := controlapi.DefaultAddr(c.StateDir)
	if c.API != "" {
		a, err := controlapi.ParseAddr(c.API)
		if err != nil {
			return err
		}
		apiAddr = a
	}
	pretrust, err := parseTrust(c.Trust)
	if err != nil {
		return err
	}
	var opts []fleet.Option
	for _, s := range c.Agent {
		a, err := fleet.ParseAgent(s)
		if err != nil {
			return err
		}
		opts = append(opts, fleet.WithAgents(a))
	}
	whois, ts, err := c.identity(log)
	if err != nil {
		return err
	}
	regAddr, err := c.registryAddr(ctx, ts)
	if err != nil {
		return err
	}

	// Listen first: a second server fails here, before it touches the
	// state of the first.
	apiLn, err := controlapi.Listen(apiAddr, controlapi.ListenOptions{AllowRemote: c.APIAllowRemote})
	if err != nil {
		return err
	}
	defer apiLn.Close()
	var uiLn net.Listener
	if c.UI != "" {
		if uiLn, err = c.uiListen(); err != nil {
			return err
		}
		defer uiLn.Close()
	}
	var srvOpts []controlapi.ServerOption
	if !apiAddr.IsUnix() {
		apiAddr.Address = apiLn.Addr().String()
		tok, err := controlapi.LoadOrCreateToken(filepath.Join(c.StateDir, controlapi.TokenName))
		if err != nil {
			return err
		}
		srvOpts = append(srvOpts, controlapi.WithToken(tok))
	}
	regLn, err := net.Listen("tcp", regAddr)
	if err != nil {
		return fmt.Errorf("registry listener: %w", err)
	}
	regURL := c.RegistryURL
	if regURL == "" {
		regURL = "http://" + regLn.Addr().String()
	}
	regSrv := &http.Server{
		Handler:           registry.NewServer(c.Registry, registry.WithLogger(log), registry.WithGate(registryGate(whois))),
		ReadHeaderTimeout: 10 * time.Second,
	}

	opts = append(opts,
		fleet.WithStateDir(c.StateDir),
		fleet.WithRegistry(c.Registry, ""),
		fleet.WithRegistryURL(regURL),
		fleet.WithWhois(whois),
		fleet.WithLogger(log),
	)
	if c.Tailnet {
		if ts == nil {
			regLn.Close()
			return errors.New("--tailnet needs tailscale; it cannot be used with --whois-static")
		}
		opts = append(opts, fleet.WithTailnet(ts), fleet.WithTailnetPort(c.TailnetPort))
	}
	if c.Inbound != "" {
		opts = append(opts, fleet.WithInbound(c.Inbound))
	}
	if isTerminal(os.Stdin) && isTerminal(os.Stderr) {
		// First contact of an unknown machine is asked on the terminal;
		// without one it is refused (trust set decides beforehand).
		opts = append(opts, fleet.WithPrompter(trust.NewTerminal(os.Stdin, os.Stderr)))
	}
	opts = append(opts, fleet.WithResetCorruptState(c.ResetState))
	if c.EveryUpdate {
		opts = append(opts, fleet.WithEveryUpdate())
	}
	f, err := fleet.New(opts...)
	if err != nil {
		regLn.Close()
		return err
	}
	defer f.Close()
	for _, d := range pretrust {
		if _, err := f.Trust().Set(d.Machine, d.Policy); err != nil {
			regLn.Close()
			return fmt.Errorf("--trust %s=%s: %w", d.Machine, d.Policy, err)
		}
		log.Info().Str("machine", d.Machine).Str("policy", string(d.Policy)).Msg("trust decision from --trust")
	}
	if err := f.Start(ctx); err != nil {
		regLn.Close()
		return err
	}
	regDone := make(chan error, 1)
	go func() { regDone <- regSrv.Serve(regLn) }()
	defer func() {
		regSrv.Close()
		if err := <-regDone; !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("registry server stopped")
		}
	}()

	backend := &fleetBackend{f: f, watchBuffer: 1024,
		doctor: serverChecks{tailscale: ts, registry: c.Registry, timeout: 20 * time.Second, caches: f, stateDir: c.StateDir}.run}
	srvOpts = append(srvOpts, controlapi.WithLogger(log), controlapi.WithTools(catalog.New(backend)))
	var uiURL string
	if uiLn != nil {
		page, auth, err := c.webPage(uiLn, backend, log)
		if err != nil {
			return err
		}
		uiURL = auth.BaseURL()
		srvOpts = append(srvOpts, controlapi.WithWebAuth(auth)) // pifleet-server ui mints its logins here
		uiDone := make(chan error, 1)
		uctx, stopUI := context.WithCancel(ctx)
		go func() { uiDone <- controlapi.Serve(uctx, uiLn, page, 5*time.Second) }()
		defer func() {
			stopUI()
			if err := <-uiDone; err != nil {
				log.Error().Err(err).Msg("web page server stopped")
			}
		}()
	}
	log.Info().Str("api", apiAddr.String()).Str("registry", regURL).Str("ui", uiURL).Str("stateDir", c.StateDir).
		Int("agents", len(c.Agent)).Str("key", publicKeyText(f)).Msg("pifleet-server serving")
	if ready != nil {
		ready(served{API: apiAddr, Registry: regURL, UI: uiURL})
	}
	return controlapi.Serve(ctx, apiLn, controlapi.NewServer(backend, srvOpts...), 5*time.Second)
}

// uiListen opens --ui: loopback unless --ui-allow-remote, a bare :PORT on
// loopback.
func (c *ServeCmd) uiListen() (net.Listener, error) {
	addr := c.UI
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	a, err := controlapi.ParseAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("--ui: %w", err)
	}
	if a.IsUnix() {
		return nil, fmt.Errorf("--ui %s: the web page needs a TCP address (127.0.0.1:9791)", c.UI)
	}
	l, err := controlapi.Listen(a, controlapi.ListenOptions{AllowRemote: c.UIAllowRemote})
	if err != nil {
		return nil, fmt.Errorf("--ui: %w", err)
	}
	return l, nil
}

// webPage is the web page over the control API: the page's requests go
// through a control API server of their own, which takes the browser
// session in place of the token and enforces its CSRF rules.
func (c *ServeCmd) webPage(l net.Listener, backend controlapi.Backend, log zerolog.Logger) (http.Handler, *controlapi.WebAuth, error) {
	tok, err := controlapi.LoadOrCreateToken(filepath.Join(c.StateDir, controlapi.TokenName))
	if err != nil {
		return nil, nil, err
	}
	addr := l.Addr().String()
	auth := controlapi.NewWebAuth("http://"+addr, tok)
	api := controlapi.NewServer(backend, controlapi.WithToken(tok), controlapi.WithWebAuth(auth), controlapi.WithLogger(log))
	opts := webui.Options{Log: &log}
	if !c.UIAllowRemote {
		opts.Hosts = webui.LoopbackHosts(addr)
	}
	return webui.New(api, auth, opts), auth, nil
}

// registryGate admits only the peers whois knows (tailnet members, or
// the static map). Every file of a sync is a request, so tailscale's
// answers are kept for a short while (identity.Cache: one lookup per peer
// every DefaultAnswerTTL, refusals DefaultRefusalTTL) instead of one
// tailscale process per file.
func registryGate(whois identity.Whois) registry.Gate {
	if !identity.IsStatic(whois) {
		whois = identity.NewCache(whois)
	}
	return func(ctx context.Context, peer netip.Addr) error {
		_, err := whois.Whois(ctx, peer)
		return err
	}
}

// identity returns the whois in force, and tailscale when it is the one.
func (c *ServeCmd) identity(log zerolog.Logger) (identity.Whois, *identity.Tailscale, error) {
	if len(c.WhoisStatic) > 0 {
		st, err := identity.ParseStatic(c.WhoisStatic...)
		if err != nil {
			return nil, nil, err
		}
		log.Warn().Strs("entries", st.Entries()).Msg("STATIC IDENTITY MAP IN FORCE: peers are identified by --whois-static, not tailscale; for loopback development and tests only")
		return st, nil, nil
	}
	ts := &identity.Tailscale{Binary: c.Tailscale}
	return ts, ts, nil
}

// registryAddr is --listen, or the tailscale IPv4 (loopback with a static
// map) on DefaultRegistryPort.
func (c *ServeCmd) registryAddr(ctx context.Context, ts *identity.Tailscale) (string, error) {
	if c.Listen != "" {
		return c.Listen, nil
	}
	port := strconv.Itoa(DefaultRegistryPort)
	if ts == nil {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	ip, err := ts.IPv4(ctx)
	if err != nil {
		return "", fmt.Errorf("registry address: no tailscale IPv4 (%w); give --listen", err)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// parseTrust reads the --trust entries NAME=POLICY.
func parseTrust(entries []string) ([]trust.Decision, error) {
	var out []trust.Decision
	for _, e := range entries {
		name, pol, ok := strings.Cut(strings.TrimSpace(e), "=")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, cli.Usagef("--trust %q is not NAME=POLICY", e)
		}
		p, err := trust.ParsePolicy(pol)
		if err != nil {
			return nil, cli.Usagef("--trust %q: %v", e, err)
		}
		out = append(out, trust.Decision{Machine: strings.TrimSpace(name), Policy: p})
	}
	return out, nil
}
