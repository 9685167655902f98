package fleet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"example.com/pifleet/session"
	"example.com/pifleet/transport/pirpc"
	"example.com/pifleet/transport/trust"
)

// DefaultPrimingPrompt is what a baseline worker is asked when
// BaselineOptions.Prompt is empty: the exploration every task on the
// repository would otherwise repeat.
const DefaultPrimingPrompt = "Explore this repository before any task arrives: its layout, how it is built and " +
	"tested, its conventions, and anything a new engineer must know to change it safely. Do not modify " +
	"any file. End with a concise summary of what you learned."

// Default baseline timeouts (the TypeScript pi-fleet's remote_baseline figures).
const (
	DefaultBaselineSettleTimeout  = 900 * time.Second
	DefaultBaselineCompactTimeout = 300 * time.Second
)

// BaselineOptions tune CreateBaseline.
type BaselineOptions struct {
	// Prompt primes the worker (DefaultPrimingPrompt when empty).
	Prompt string
	// Repo names the baseline baseline:<Repo>; the base name of cwd when
	// empty.
	Repo string
	// SettleTimeout bounds the priming run, CompactTimeout the compaction.
	SettleTimeout, CompactTimeout time.Duration
	// Spawn says where the baseline is made (Agent, Cwd, Bundle) and is
	// passed to Spawn (model, env, budget, trace id, progress).
	Spawn SpawnOptions
}

// Baseline is a primed, compacted, pinned session.
type Baseline struct {
	Machine, Cwd string
	// Path and SessionID name the session file on the agent's disk.
	Path, SessionID string
	// Name is baseline:<repo>.
	Name string
	// GitHead is the repository's HEAD when the baseline was primed (""
	// outside a git repository: such a baseline is never stale).
	GitHead            string
	Bundle, BundleHash string
	// Compacted is false when pi found nothing to compact.
	Compacted bool
	// Summary is the worker's answer to the priming prompt.
	Summary string
}

// CreateBaseline primes a session for the repository in opts.Spawn.Cwd on
// agent opts.Spawn.Agent: it spawns a worker of opts.Spawn.Bundle, runs the priming prompt until
// settled, compacts, names the session baseline:<repo>, records it in the
// registry as a pinned baseline with the repository's git HEAD, and stops
// the worker; the session file stays. Tasks then start from it with
// SpawnOptions.FromSession (a clone each).
func (f *Fleet) CreateBaseline(ctx context.Context, opts BaselineOptions) (*Baseline, error) {
	machine, cwd := opts.Spawn.Agent, opts.Spawn.Cwd
	if machine == "" || cwd == "" {
		return nil, &ConfigError{Field: "Spawn", Reason: "a baseline needs an agent and a cwd"}
	}
	if err := f.waitAgent(ctx, machine, false); err != nil {
		return nil, fmt.Errorf("fleet: baseline: %w", err)
	}
	repo := opts.Repo
	if repo == "" {
		repo = filepath.Base(filepath.Clean(cwd))
	}
	name, err := session.BaselineName(repo)
	if err != nil {
		return nil, err
	}
	prompt := opts.Prompt
	if strings.TrimSpace(prompt) == "" {
		prompt = DefaultPrimingPrompt
	}
	settle, compact := opts.SettleTimeout, opts.CompactTimeout
	if settle <= 0 {
		settle = DefaultBaselineSettleTimeout
	}
	if compact <= 0 {
		compact = DefaultBaselineCompactTimeout
	}
	if opts.Spawn.FromSession != "" {
		return nil, &ConfigError{Field: "Spawn.FromSession", Reason: "a baseline starts on a new session"}
	}
	head, err := f.RepoHead(ctx, machine, cwd)
	if err != nil {
		var fe *FileError
		if !errors.As(err, &fe) || fe.Code != "not_a_repo" {
			return nil, fmt.Errorf("fleet: baseline: %w", err)
		}
		head = "" // not a git repository: never stale
	}
	inst, err := f.Spawn(ctx, opts.Spawn)
	if err != nil {
		return nil, err
	}
	// The worker is stopped in every case; the session file stays.
	stopped := false
	defer func() {
		if !stopped {
			_ = inst.Stop(context.WithoutCancel(ctx))
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, settle)
	summary, err := inst.Prompt(pctx, prompt, PromptOptions{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("fleet: baseline: priming prompt: %w", err)
	}
	b := &Baseline{Machine: machine, Cwd: cwd, Name: name, GitHead: head, Summary: summary}
	_, err = f.rpcWithin(ctx, inst.id, map[string]any{"type": "compact"}, trust.OpSteer, compact)
	switch {
	case err == nil:
		b.Compacted = true
	case nothingToCompact(err):
	default:
		return nil, fmt.Errorf("fleet: baseline: compact: %w", err)
	}
	if err := f.setSessionName(ctx, inst.id, name); err != nil {
		return nil, fmt.Errorf("fleet: baseline: %w", err)
	}
	st, err := inst.GetState(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet: baseline: get_state: %w", err)
	}
	if st.SessionFile == "" {
		return nil, fmt.Errorf("fleet: baseline: the worker names no session file")
	}
	b.Path, b.SessionID = st.SessionFile, st.SessionID
	f.mu.Lock()
	if in := f.core.instance(inst.id); in != nil {
		b.Bundle, b.BundleHash = in.rec.Bundle, in.rec.BundleHash
		in.rec.SessionPath = st.SessionFile
	}
	f.sessions.projection(machine).Annotate(machine, b.Path, func(sf *session.ServerFields) {
		sf.Bundle, sf.BundleHash, sf.GitHead, sf.PinnedByServer = b.Bundle, b.BundleHash, head, true
		sf.AttachedInstanceID = ""
	})
	if head != "" {
		f.sessions.setHead(machine, cwd, head)
	}
	f.sessions.persist(machine)
	f.mu.Unlock()
	stopped = true
	if err := inst.Stop(ctx); err != nil {
		return b, fmt.Errorf("fleet: baseline %s created but its worker did not stop: %w", name, err)
	}
	// The agent reports the stopped worker's file at once; wait for it, so
	// that a spawn from the baseline right after this finds it.
	if _, err := f.awaitSession(ctx, machine, b.Path, func(r session.Record) bool { return r.Name == name }); err != nil {
		f.log.Warn().Err(err).Str("baseline", name).Msg("baseline not reported yet; it is listed on the agent's next report")
	}
	f.log.Info().Str("agent", machine).Str("baseline", name).Str("session", b.Path).Str("gitHead", head).Msg("baseline created")
	return b, nil
}

// nothingToCompact: pi refuses to compact a session too small to need it
// (or already compacted); the baseline is still usable.
func nothingToCompact(err error) bool {
	var ce *pirpc.CommandError
	if !errors.As(err, &ce) {
		return false
	}
	m := strings.ToLower(ce.Message)
	return strings.Contains(m, "nothing to compact") || strings.Contains(m, "already compacted")
}

// IsStale reports whether the baseline's repository has moved on: HEAD on
// its machine is no longer GitHead.
func (f *Fleet) IsStale(ctx context.Context, b session.Record) (bool, error) {
	if b.Kind != session.KindBaseline || b.GitHead == "" {
		return false, nil
	}
	head, err := f.RepoHead(ctx, b.Machine, b.Cwd)
	if err != nil {
		return false, err
	}
	return head != b.GitHead, nil
}
