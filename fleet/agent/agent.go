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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/fleet/agent/internal/execplane"
	"example.com/pifleet/fleet/agent/internal/worktree"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
)

// Agent is the daemon: it listens for the pinned server, supervises pi
// workers and keeps their task reports until acknowledged. Create it with
// New, run it with Run, and release it with Close.
type Agent struct {
	cfg   Config
	log   zerolog.Logger
	store *agentstore.Store
	// key is the agent's own key (<StateDir>/agent.key), proven to
	// servers that ask (agents that dial in).
	key ed25519.PrivateKey
	// learnMu serialises trust-on-first-use of the server key.
	learnMu sync.Mutex
	// handles keeps the workers' re-adoption handles (no fsync).
	handles *handleFiles
	cache   *cache.Cache

	lister  *session.Lister
	watcher *session.Watcher // owned by the reporter goroutine
	// rescan asks the reporter for a poll now (a worker settled, started
	// or stopped: its session file changed).
	rescan chan struct{}

	// cursors remember where the last session_entries answer of each file
	// ended (sessionEntries).
	cursorMu sync.Mutex
	cursors  map[string]session.Cursor

	ready chan struct{} // closed once the first listener is bound
	addr  atomic.Pointer[net.TCPAddr]

	mu    sync.Mutex
	peers map[*peer]struct{}
	// live is peers as a slice, replaced (never changed) under mu when
	// peers changes: every streamed event goes to it, and a copy of the
	// map per event cost an allocation and a lock on the pump's path.
	live      atomic.Pointer[[]*peer]
	instances map[string]*instance // this life, by id
	order     []string             // instance ids in start order
	lost      []*instance          // previous life, reported lost
	spawning  int                  // spawns validated and not yet answered
	// cancels ends an unanswered spawn (spawn_cancel), by peer and spawn id.
	cancels map[spawnKey]context.CancelCauseFunc
	closed  bool

	models modelCache
	exec   *execplane.Manager // nil unless ExecPolicy is full
	git    worktree.Git       // isolated workers' worktrees

	outboxKick chan struct{}
	deliverMu  sync.Mutex // one delivery pass or replay at a time

	// storeMu orders task_done writes with the ones waiting in unstored
	// (their write failed; storeLoop writes them again, storeKick wakes it).
	storeMu       sync.Mutex
	unstored      []unstoredDone
	storeErr      error
	storeErrSince time.Time
	storeKick     chan struct{}
	hooks         testHooks
	connSeq       atomic.Uint64

	runCtx    context.Context
	runCancel context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	execClose sync.Once
}

// New checks cfg, opens the agent's database and bundle cache under
// cfg.StateDir and returns an agent ready to Run. Nothing listens and no
// worker is touched until Run.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	for _, dir := range []string{"workers", "handles"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, dir), 0o700); err != nil {
			return nil, fmt.Errorf("agent: state dir: %w", err)
		}
	}
	stopts := []agentstore.Option{agentstore.WithClock(cfg.Now), agentstore.WithLogger(cfg.Logger),
		agentstore.WithRetryPolicy(retryPolicy{min: cfg.OutboxRetryMin, max: cfg.OutboxRetryMax})}
	if cfg.ResetCorruptState {
		stopts = append(stopts, agentstore.WithResetCorrupt(func(movedTo string, cause error) {
			cfg.Logger.Warn().Str("movedTo", movedTo).AnErr("cause", cause).Msg("corrupt state file moved aside; starting with an empty state")
		}))
	}
	store, err := agentstore.Open(cfg.StateDir, stopts...)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	bc, err := cache.Open(cfg.CacheDir, cache.WithLogger(cfg.Logger))
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("agent: bundle cache: %w", err)
	}
	ring, err := auth.LoadOrCreate(filepath.Join(cfg.StateDir, AgentKeyFile))
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("agent: %w", err)
	}
	lister := session.NewLister(cfg.SessionsRoot, session.WithLogger(cfg.Logger))
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{
		cfg:        cfg,
		log:        cfg.Logger.With().Str("component", "agent").Logger(),
		store:      store,
		key:        ring.Current,
		handles:    newHandleFiles(filepath.Join(cfg.StateDir, "handles")),
		cache:      bc,
		lister:     lister,
		watcher:    session.NewWatcher(lister),
		rescan:     make(chan struct{}, 1),
		ready:      make(chan struct{}),
		peers:      map[*peer]struct{}{},
		instances:  map[string]*instance{},
		cancels:    map[spawnKey]context.CancelCauseFunc{},
		outboxKick: make(chan struct{}, 1),
		storeKick:  make(chan struct{}, 1),
		runCtx:     ctx,
		runCancel:  cancel,
		git:        worktree.Git{Bin: cfg.Git, Env: cfg.Env},
	}
	if at := os.Getenv(EnvSpawnHold); at != "" {
		a.hooks.spawnHold = a.holdAt(at)
	}
	if cfg.ExecPolicy == ExecFull {
		a.exec, err = execplane.New(execplane.Config{MaxConcurrent: cfg.MaxExecs, DefaultTimeout: cfg.ExecTimeout,
			Roots: cfg.ExecRoots, AuditFile: cfg.ExecAuditFile, Env: cfg.Env, Shell: cfg.ExecShell,
			Now: cfg.Now, Logger: cfg.Logger})
		if err != nil {
			store.Close()
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	return a, nil
}

// Ready is closed once the agent listens (see Addr).
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Addr returns the address the agent listens on now (nil before Ready).
func (a *Agent) Addr() *net.TCPAddr { return a.addr.Load() }

// Run re-adopts the workers of the agent's previous life, then listens,
// dials the servers of Config.Dial, and serves until ctx ends or Close is
// called. Workers keep running when Run
// returns (see Close).
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(a.runCtx, cancel)
	defer stop()

	if err := a.readopt(ctx); err != nil {
		return err
	}
	a.reconcileWorktrees(ctx)
	a.wg.Go(func() { a.deliverLoop(ctx) })
	a.wg.Go(func() { a.storeLoop(ctx) })
	a.wg.Go(func() { a.reportLoop(ctx) })
	for _, addr := range a.cfg.Dial {
		a.wg.Go(func() { a.dialServer(ctx, addr) })
	}
	err := a.listen(ctx)
	cancel() // a listener that failed ends the rest too
	a.letGo()
	a.wg.Wait()
	return err
}

// Close stops serving and closes every connection, then detaches from the
// workers (they keep running under their shims and a restarted agent
// re-adopts them) and closes the database. It is safe to call more than
// once.
func (a *Agent) Close() error {
	var err error
	a.closeOnce.Do(func() {
		a.runCancel()
		a.letGo()
		a.wg.Wait()
		a.handles.close()
		err = a.store.Close()
	})
	return err
}

// letGo stops serving: no connection or worker is taken on from now on,
// every connection is closed, executions are aborted, and the agent lets
// go of every worker (each keeps running under its shim, for the next
// agent to re-adopt), so that every goroutine of the agent ends. Run calls
// it when its context ends, so that a signalled daemon exits at once
// whatever the number of workers; Close calls it again (a no-op then).
func (a *Agent) letGo() {
	a.mu.Lock()
	a.closed = true
	peers := make([]*peer, 0, len(a.peers))
	for p := range a.peers {
		peers = append(peers, p)
	}
	insts := make([]*instance, 0, len(a.instances))
	for _, in := range a.instances {
		insts = append(insts, in)
	}
	a.mu.Unlock()
	if a.exec != nil {
		// Shutdown aborts every command (reference 1.9); their exits
		// still reach the owners.
		a.execClose.Do(func() { _ = a.exec.Close() })
	}
	for _, p := range peers {
		p.conn.Close()
	}
	var detaching sync.WaitGroup
	for _, in := range insts {
		detaching.Go(in.detach) // ends its event pump; bounded each
	}
	detaching.Wait()
}

// listen binds, serves, and rebinds when the provided address changes.
func (a *Agent) listen(ctx context.Context) error {
	if a.cfg.Listen != "" {
		ln, err := net.Listen("tcp", a.cfg.Listen)
		if err != nil {
			return fmt.Errorf("agent: listen %s: %w", a.cfg.Listen, err)
		}
		a.bound(ln)
		return a.serve(ctx, ln)
	}
	var (
		cur     netip.Addr
		ln      net.Listener
		serving sync.WaitGroup
	)
	defer serving.Wait()
	bind := func() error {
		ip, err := a.cfg.IPProvider(ctx)
		if err != nil {
			return fmt.Errorf("agent: listen address: %w", err)
		}
		if ip == cur && ln != nil {
			return nil
		}
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(a.cfg.Port))
		next, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("agent: listen %s: %w", addr, err)
		}
		if ln != nil {
			a.log.Info().Stringer("from", cur).Stringer("to", ip).Msg("listen address changed; rebinding")
			ln.Close() // connections and workers are left alone
		}
		cur, ln = ip, next
		a.bound(next)
		serving.Go(func() { _ = a.serve(ctx, next) })
		return nil
	}
	if err := bind(); err != nil {
		return err
	}
	t := time.NewTicker(a.cfg.RebindInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			ln.Close()
			return nil
		case <-t.C:
			if err := bind(); err != nil {
				a.log.Warn().Err(err).Msg("rebind check failed; keeping the current address")
			}
		}
	}
}

func (a *Agent) bound(ln net.Listener) {
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		a.addr.Store(ta)
	}
	a.log.Info().Stringer("addr", ln.Addr()).Str("pin", a.cfg.Pin.String()).Msg("listening")
	if a.hooks.bound != nil {
		a.hooks.bound(ln.Addr())
	}
	select {
	case <-a.ready:
	default:
		close(a.ready)
	}
}

// serve accepts on ln until it is closed or ctx ends. Each connection is
// gated (whois + pin) before anything is written to it.
func (a *Agent) serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			a.log.Warn().Err(err).Msg("accept failed")
			continue
		}
		a.wg.Go(func() { a.admit(ctx, nc) })
	}
}

// admit sets up an accepted connection: the pin gate (a refused peer is
// closed without a byte), then the key handshake (the server must prove a
// trusted key before anything but the agent's hello is sent or any frame
// processed).
func (a *Agent) admit(ctx context.Context, nc net.Conn) {
	p, err := a.setup(ctx, nc)
	if err != nil {
		return // logged by gate or authenticate
	}
	a.handle(ctx, p)
}

// The connection-setup path. Accepted and dialled connections go through
// the same two steps, in this order:
//
//	gate          whois of the remote address and the pin check, before any byte
//	authenticate  our hello with a fresh challenge, the server's proof, our proof
//
// setup runs both for an accepted connection; a dialled one runs them from
// its Redialer's Dial hook (dial.go), before the Redialer starts the Conn.

// setup gates and authenticates an accepted nc and starts its Conn. On
// error nc is closed.
func (a *Agent) setup(ctx context.Context, nc net.Conn) (*peer, error) {
	id, err := a.gate(ctx, nc)
	if err != nil {
		a.log.Warn().Err(err).Stringer("remote", transport.RemoteAddrPort(nc)).Msg("connection refused")
		return nil, err
	}
	res, err := a.authenticate(ctx, nc, id, false)
	if err != nil {
		return nil, err
	}
	return a.newPeer(transport.NewConn(res.Conn, a.connOptions()), id, res), nil
}

// gate identifies nc's peer and admits only the pinned server; anyone
// else is closed without a byte written.
func (a *Agent) gate(ctx context.Context, nc net.Conn) (identity.Identity, error) {
	remote := transport.RemoteAddrPort(nc)
	gctx, cancel := context.WithTimeout(ctx, transport.DefaultGateTimeout)
	id, err := a.cfg.Pin.Admit(gctx, a.cfg.Whois, remote)
	cancel()
	if err != nil {
		nc.Close()
		return id, err
	}
	return id, nil
}

// connOptions configure every connection, accepted or dialled.
func (a *Agent) connOptions() transport.Options {
	return transport.Options{Logger: a.log,
		HeartbeatInterval: a.cfg.HeartbeatInterval, ExpiryTimeout: a.cfg.ExpiryTimeout,
		SendQueue: DefaultPeerQueueFrames, SendQueueBytes: a.cfg.PeerQueueBytes}
}

// tcpLiveness says whether a connection over nc announces
// tcp-liveness: where TCP itself can watch it (Linux, a TCP socket), and
// not behind a proxy or NAT, whose own TCP endpoint would answer for the
// server.
func (a *Agent) tcpLiveness(nc net.Conn) bool {
	return !a.cfg.NoTCPLiveness && !a.cfg.BehindProxy && transport.CanWatchTCP(nc)
}

func (a *Agent) newPeer(c *transport.Conn, id identity.Identity, res *auth.AgentResult) *peer {
	remote := transport.RemoteAddrPort(c.NetConn())
	p := &peer{
		conn:        c,
		key:         fmt.Sprintf("%s:%s:%d#%d", id.Machine, id.User, remote.Port(), a.connSeq.Add(1)),
		id:          id,
		sent:        make(chan struct{}),
		tcpLiveness: a.tcpLiveness(c.NetConn()), // as authenticate announced it
		log:         a.log,
	}
	if res.ServerHello != nil {
		p.greetedBy(res.ServerHello)
	}
	return p
}

// authenticate runs the key handshake of every connection, whoever
// dialled: the agent's hello with a fresh challenge, then the server's
// proof, then the agent's own. A wrong, missing or late proof closes nc
// and is logged with the peer's identity. dialed says that the agent
// opened the connection.
func (a *Agent) authenticate(ctx context.Context, nc net.Conn, id identity.Identity, dialed bool) (*auth.AgentResult, error) {
	remote := transport.RemoteAddrPort(nc)
	trusted, err := a.trustedServerKeys()
	if err != nil {
		nc.Close()
		a.log.Error().Err(err).Stringer("remote", remote).Msg("connection refused: trusted server keys unreadable")
		return nil, err
	}
	hello := a.hello()
	if a.tcpLiveness(nc) {
		hello.Capabilities = append(hello.Capabilities, transport.CapabilityTCPLiveness)
	}
	res, err := auth.AgentHandshake(ctx, nc, auth.AgentConfig{
		Hello:           hello,
		Key:             a.key,
		TrustedKeys:     trusted,
		TrustOnFirstUse: a.cfg.TrustFirstServerKey,
		Learn:           a.learnServerKey,
		AllowV1:         a.cfg.AllowV1Server && !dialed, // a server dialled in to is a pifleet one
		Timeout:         a.cfg.HandshakeTimeout,
		Dialed:          dialed,
		Proxied:         a.cfg.BehindProxy,
	})
	if err != nil {
		a.log.Warn().Err(err).Stringer("remote", remote).Str("machine", id.Machine).Str("user", id.User).
			Msg("connection refused: the server did not prove a trusted key")
		return nil, err
	}
	ev := a.log.Info().Stringer("remote", remote).Str("machine", id.Machine).Str("user", id.User)
	switch {
	case res.V1():
		a.log.Warn().Stringer("remote", remote).Str("machine", id.Machine).Str("user", id.User).
			Msg("server proved no key; accepted because v1 servers are allowed (--allow-v1-server)")
	case res.Learned:
		ev.Str("key", auth.FormatPublicKey(res.ServerKey)).Msg("server key trusted on first use and stored")
	default:
		ev.Str("key", auth.FormatPublicKey(res.ServerKey)).Msg("server proved its key")
	}
	return res, nil
}

// peer is one admitted connection.
type peer struct {
	conn *transport.Conn
	key  string // owner key of tasks submitted on this connection
	id   identity.Identity
	// pifleet is set once the peer announced CapabilityPifleet (in the
	// handshake's hello, or a later one).
	pifleet atomic.Bool
	sent    chan struct{} // closed after the outbox replay
	dropped atomic.Bool   // closed for falling behind (dropPeer)
	// delta is set once the peer announced CapabilityEventDelta: it gets
	// streamed updates as event_delta frames (stream.go).
	delta atomic.Bool
	// refs is set once the peer announced CapabilityEventRefs too: its
	// turn_end and agent_end refer to the messages it got before.
	refs atomic.Bool
	// coalesce is set once the peer announced CapabilityEventCoalesce
	// too: the updates of a text that wait in one frame go joined.
	coalesce atomic.Bool
	// tcpLiveness: our hello announced CapabilityTCPLiveness; watched is
	// set once the server's did too and TCP watches the connection.
	tcpLiveness bool
	watched     atomic.Bool
	log         zerolog.Logger
}

// greetedBy records the server's hello (the handshake's, or a later one).
func (p *peer) greetedBy(h *transport.HelloFrame) {
	if slices.Contains(h.Capabilities, transport.CapabilityPifleet) {
		p.pifleet.Store(true)
	}
	if slices.Contains(h.Capabilities, transport.CapabilityEventDelta) {
		p.delta.Store(true)
	}
	if slices.Contains(h.Capabilities, transport.CapabilityEventRefs) {
		p.refs.Store(true)
	}
	if slices.Contains(h.Capabilities, transport.CapabilityEventCoalesce) {
		p.coalesce.Store(true)
	}
	if p.tcpLiveness && slices.Contains(h.Capabilities, transport.CapabilityTCPLiveness) && !p.watched.Swap(true) {
		// The server sends no more heartbeats: without the watch the
		// receive expiry would close the idle connection.
		if err := p.conn.WatchTCP(); err != nil {
			p.log.Error().Err(err).Str("peer", p.key).Msg("closing the connection: the server sends no heartbeats and TCP cannot watch it")
			p.conn.Close()
			return
		}
		p.log.Debug().Str("peer", p.key).Msg("TCP watches the connection; the server sends no heartbeats")
	}
}

// handle runs the rest of the accept sequence of reference 1.6 on an
// authenticated connection (the hello was sent by authenticate), and then
// dispatches until it closes.
func (a *Agent) handle(ctx context.Context, p *peer) {
	log := a.log.With().Str("peer", p.key).Logger()
	log.Info().Msg("server connected")
	// From here on the peer receives events: add it before the replay so
	// nothing produced meanwhile is missed, yet after hello.
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		p.conn.Close()
		return
	}
	if n := a.connsOfLocked(p.id); a.cfg.MaxConnsPerIdentity > 0 && n >= a.cfg.MaxConnsPerIdentity {
		a.mu.Unlock()
		log.Warn().Str("machine", p.id.Machine).Str("user", p.id.User).Int("open", n).Int("max", a.cfg.MaxConnsPerIdentity).
			Msg("connection refused: this identity holds the most connections allowed (--max-conns-per-identity)")
		p.conn.Close()
		return
	}
	a.peers[p] = struct{}{}
	a.publishPeersLocked()
	a.mu.Unlock()
	a.replayOutbox(ctx, p)
	close(p.sent)
	a.kickOutbox() // entries due meanwhile
	a.wg.Go(func() { a.sendFullReport(ctx, p) })
	a.wg.Go(func() { a.replayExits(ctx, p) })

	// The cause reaches whatever the connection's requests were waiting
	// for (a spawn waiting for the model probe says why it gave up).
	dctx, cancel := context.WithCancelCause(ctx)
	frames := make(chan transport.Frame, 64)
	p.conn.SetHandler(func(f transport.Frame) {
		select {
		case frames <- f:
		case <-dctx.Done():
		}
	})
	a.wg.Go(func() { a.dispatchLoop(dctx, p, frames) })
	select {
	case <-p.conn.Done():
		cancel(fmt.Errorf("the connection from %s closed: %v", p.key, p.conn.Err()))
	case <-ctx.Done():
		p.conn.Close()
		cancel(errors.New("the agent shuts down"))
	}
	a.mu.Lock()
	delete(a.peers, p)
	a.publishPeersLocked()
	a.mu.Unlock()
	if a.hooks.peerGone != nil {
		a.hooks.peerGone(p.key)
	}
	if a.exec != nil {
		if n := a.exec.AbortOwner(p.key); n > 0 {
			log.Info().Int("executions", n).Msg("owner gone: its commands aborted")
		}
	}
	log.Info().Err(p.conn.Err()).Msg("server disconnected")
}

// connsOfLocked counts the connections id holds.
func (a *Agent) connsOfLocked(id identity.Identity) int {
	n := 0
	for q := range a.peers {
		if q.id.Machine == id.Machine && q.id.User == id.User {
			n++
		}
	}
	return n
}

// replayExits tells a pifleet server that connects about every worker that
// ended in this life (or could not be re-adopted from the previous one):
// exits that happened while it was away. A worker that ends meanwhile is
// told by broadcast as well; a server ignores a notice for an instance it
// already knows ended. A TypeScript server learns the same from the
// instances listing. Whether the server is a pifleet one is known from
// the handshake's hello.
func (a *Agent) replayExits(ctx context.Context, p *peer) {
	if !p.pifleet.Load() {
		return
	}
	a.mu.Lock()
	ended := slices.Clone(a.lost)
	for _, id := range a.order {
		ended = append(ended, a.instances[id])
	}
	a.mu.Unlock()
	for _, in := range ended {
		if f := in.exitNotice(); f != nil {
			if p.conn.Send(ctx, f) != nil {
				return
			}
		}
	}
}

// hello is the agent's introduction.
func (a *Agent) hello() *transport.HelloFrame {
	h := &transport.HelloFrame{
		Machine:         a.cfg.Machine,
		Role:            transport.RoleAgent,
		PackageVersion:  a.cfg.Version,
		Platform:        Platform(),
		AvailableModels: a.models.known(),
		Capabilities:    a.capabilities(),
	}
	if a.cfg.MaxWorkers > 0 {
		h.MaxWorkers = new(float64(a.cfg.MaxWorkers))
	}
	return h
}

// capabilities adds exec-v1 to Capabilities when the exec plane is on.
func (a *Agent) capabilities() []string {
	caps := Capabilities()
	if a.exec != nil {
		caps = append(caps, transport.CapabilityExec)
	}
	return caps
}

// Capabilities lists what hello announces whatever the configuration:
// pifleet's additional frames (CapabilityPifleet) and the features behind
// them. An agent whose exec plane is on (ExecFull) also announces
// "exec-v1".
func Capabilities() []string {
	return []string{transport.CapabilityPifleet, "event-seq", "event-replay", "session-entries",
		"rebundle", "set-tools", "model-pin", "spawn-progress", "sessions-incremental", "sessions-paged", "session-attach", "repo-head", "readopt", transport.CapabilityCacheVerify,
		transport.CapabilityWorktree, transport.CapabilityEventDelta, transport.CapabilityEventRefs, transport.CapabilityEventCoalesce, transport.CapabilitySpawnCancel, transport.CapabilitySpawnID, transport.CapabilityUIEnded}
}

// peersSnapshot returns the connected peers that finished their accept
// sequence. The slice is shared: read it, never change it.
func (a *Agent) peersSnapshot() []*peer {
	if live := a.live.Load(); live != nil {
		return *live
	}
	return nil
}

// publishPeersLocked makes peersSnapshot return what peers holds now.
// Caller holds mu.
func (a *Agent) publishPeersLocked() {
	live := make([]*peer, 0, len(a.peers))
	for p := range a.peers {
		live = append(live, p)
	}
	a.live.Store(&live)
}

// broadcast offers f to every connected peer (see offer: it never waits
// for one). pifleetOnly limits it to pifleet servers. It returns how many
// peers took f.
func (a *Agent) broadcast(f transport.Frame, pifleetOnly bool) int {
	n := 0
	for _, p := range a.peersSnapshot() {
		if pifleetOnly && !p.pifleet.Load() {
			continue
		}
		if a.offer(p, f) == nil {
			n++
		}
	}
	return n
}

// offer queues f for p without waiting. A peer whose queue has no room
// (it fell PeerQueueBytes behind, or PeerQueueFrames) is dropped: closed,
// with the reason logged, so that it cannot hold back the events of the
// others or make the agent buffer without bound. It reconnects and
// catches up from the event ring and the outbox.
func (a *Agent) offer(p *peer, f transport.Frame) error {
	err := p.conn.TrySend(f)
	if errors.Is(err, transport.ErrSendQueueFull) {
		a.dropPeer(p, f)
	}
	return err
}

// dropPeer closes a peer that fell too far behind.
func (a *Agent) dropPeer(p *peer, f transport.Frame) {
	if p.dropped.Swap(true) {
		return
	}
	a.log.Warn().Str("peer", p.key).Int("queuedBytes", p.conn.QueuedBytes()).Int("budgetBytes", a.cfg.PeerQueueBytes).
		Str("frame", f.FrameType()).
		Msg("server connection dropped: it stopped reading and fell past its send budget; it can reconnect and catch up")
	if a.hooks.peerDropped != nil {
		a.hooks.peerDropped(p.key)
	}
	p.conn.Close()
}

// reply answers a request on its connection.
func (p *peer) reply(ctx context.Context, f transport.Frame) {
	_ = p.conn.Send(ctx, f)
}

// errorFrame builds an error reply (id echoed when the request had one).
func errorFrame(req transport.Frame, code, msg string) *transport.ErrorFrame {
	f := &transport.ErrorFrame{Code: code, Message: msg}
	if req != nil {
		f.ID = req.Envelope().ID
	}
	return f
}

// testHooks let the package's tests wait for events they cannot see on
// the wire, instead of sleeping.
type testHooks struct {
	bound    func(net.Addr)
	taskDone func(agentstore.Entry)
	// taskDoneUnstored: a task_done could not be stored and waits.
	taskDoneUnstored func(taskID string)
	command          func([]string) []string // rewrites the worker executable
	peerDropped      func(key string)        // a peer fell behind and was closed
	peerGone         func(key string)        // a peer's connection ended
	// spawnHold is called at each named point of a spawn (spawnPoint).
	spawnHold func(point string)
}

// EnvSpawnHold, for fault-injection tests only, names a point of every
// spawn ("before-start", "started", "before-complete", "before-answer"),
// or holdRevisionRecorded or holdRevisionSent of every revision, at which
// the agent
// logs that it holds and then waits until it is killed, so that a test can
// kill it there.
const EnvSpawnHold = "PIFLEET_TEST_SPAWN_HOLD"

// holdRevisionRecorded is the point of a revision (task_reject) where its
// rejection and task are stored and its prompt is not yet sent.
const holdRevisionRecorded = "revision-recorded"

// holdRevisionSent is the point of a revision where the worker's shim has
// its prompt and the agent has not yet noted so.
const holdRevisionSent = "revision-sent"

// spawnPoint passes a named point of a spawn.
func (h testHooks) spawnPoint(point string) {
	if h.spawnHold != nil {
		h.spawnHold(point)
	}
}

// holdAt is the spawnHold of EnvSpawnHold.
func (a *Agent) holdAt(at string) func(string) {
	return func(point string) {
		if point != at {
			return
		}
		a.log.Warn().Str("point", point).Msg("spawn held for a fault-injection test (" + EnvSpawnHold + ")")
		select {}
	}
}

// retryPolicy is the outbox's re-send pacing: exponential from min to max.
type retryPolicy struct{ min, max time.Duration }

func (r retryPolicy) ForAttempt(n float64) time.Duration {
	d := r.min
	for i := 0; i < int(n) && d < r.max; i++ {
		d *= 2
	}
	return min(d, r.max)
}
