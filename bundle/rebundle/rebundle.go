package rebundle

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle/cache"
)

// Bundle identifies the bundle version a worker runs.
type Bundle struct {
	Name string
	Hash string
}

// SyncFunc brings bundle name into the worker machine's cache, usually
// cache.Cache.Sync with the agent's registry (and no pinned hash: using
// another bundle drops the pin).
type SyncFunc func(ctx context.Context, name string) (*cache.Result, error)

// RestartFunc restarts the worker on its session file with the resources
// of the synced bundle. When it fails, the worker must be running bundle A
// again (the agent restarts it with A's resources if it had stopped it).
type RestartFunc func(ctx context.Context, to *cache.Result) error

// Options tunes Switch. The zero value is usable.
type Options struct {
	// Log receives one line per transition. Default: no logging.
	Log *zerolog.Logger
	// OnState, when set, is called with every state entered, in order,
	// from the goroutine that called Switch.
	OnState func(State)
}

// Outcome says how a switch ended.
type Outcome struct {
	// Running is the bundle the worker runs now: the target after a
	// switch, the previous one otherwise.
	Running Bundle
	// Switched is true when the worker moved to the target (running_new).
	Switched bool
	// Sync is the target's sync result, when the sync succeeded; its
	// Status tells whether the registry was reachable.
	Sync *cache.Result
	// Trail lists the states the switch went through.
	Trail []State
}

// Error reports a switch that did not happen. The worker still runs From.
// Unwrap gives the cause: a *cache.SyncError (errors.Is works with the
// bundle error codes) or the restart's error.
type Error struct {
	From Bundle
	To   string
	// Step is syncing or reloading: where the switch failed.
	Step State
	Err  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("switching from bundle %q to %q failed while %s; still on %q: %v", e.From.Name, e.To, e.Step, e.From.Name, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Switch moves a worker running bundle from to bundle to, following Table:
// sync to, then restart the worker with it. When either step fails the
// worker keeps from, and Switch returns an *Error alongside an Outcome
// whose Running is from.
func Switch(ctx context.Context, from Bundle, to string, sync SyncFunc, restart RestartFunc, opts Options) (Outcome, error) {
	log := zerolog.Nop()
	if opts.Log != nil {
		log = opts.Log.With().Str("component", "rebundle").Str("from", from.Name).Str("to", to).Logger()
	}
	m := Table.Start()
	out := Outcome{Running: from}
	enter := func() {
		out.Trail = append(out.Trail, m.State())
		if opts.OnState != nil {
			opts.OnState(m.State())
		}
	}
	fire := func(ev Event) {
		from := m.State()
		if err := m.Fire(ev); err != nil {
			// Switch fires only the events of the path it takes; this is a
			// bug in this function, and the state is left as it was.
			log.Error().Err(err).Msg("rebundle fired a stale event")
			return
		}
		log.Debug().Str("from", string(from)).Str("event", string(ev)).Str("to", string(m.State())).Msg("rebundle transition")
		enter()
	}
	keep := func(step State, err error) (Outcome, error) {
		fire(EventKept)
		log.Warn().Err(err).Msg("bundle switch failed; the worker keeps its bundle")
		return out, &Error{From: from, To: to, Step: step, Err: err}
	}

	enter()
	fire(EventUse)
	res, err := sync(ctx, to)
	if err != nil {
		fire(EventSyncFailed)
		return keep(StateSyncing, err)
	}
	out.Sync = res
	fire(EventSynced)
	if err := restart(ctx, res); err != nil {
		fire(EventReloadFailed)
		return keep(StateReloading, err)
	}
	fire(EventReloaded)
	out.Running = Bundle{Name: res.Bundle, Hash: res.BundleHash}
	out.Switched = true
	return out, nil
}
