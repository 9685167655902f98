package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/internal/shim"
)

// Discard ends, for good, a worker that a previous agent process started
// and nobody will adopt: a spawn cut short by the agent's death, or a
// worker whose record cannot be used any more. It attaches to the shim p
// names, has it stop the worker (stdin closed, then SIGTERM and SIGKILL
// to its process group after grace each), and acknowledges the exit, so
// that the shim goes at once instead of lingering for an agent. It returns
// once the shim has finished, or with an error matching ErrGone when no
// shim serves p (nothing is left running then: a shim whose starter died
// before it was ready stops its worker by itself).
func Discard(ctx context.Context, p Persisted, grace time.Duration, log zerolog.Logger) error {
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	c, err := shim.Attach(ctx, shim.AttachConfig{Socket: p.Socket, InstanceID: p.InstanceID, Token: p.Token, Logger: log})
	if err != nil {
		if errors.Is(err, shim.ErrNoShim) || errors.Is(err, shim.ErrWrongShim) {
			return fmt.Errorf("%w: instance %s: %w", ErrGone, p.InstanceID, err)
		}
		return fmt.Errorf("worker %s: discard: %w", p.InstanceID, err)
	}
	defer c.Close()
	if err := c.Stop(ctx, shim.StopOptions{CloseStdin: true, Grace: grace}); err != nil && !errors.Is(err, shim.ErrExited) {
		return fmt.Errorf("worker %s: discard: stop: %w", p.InstanceID, err)
	}
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				// The stream ends cleanly once the exit is acknowledged and
				// the shim finished.
				if err := c.Err(); err != nil && !errors.Is(err, shim.ErrExited) {
					return fmt.Errorf("worker %s: discard: %w", p.InstanceID, err)
				}
				return nil
			}
			if err := c.Ack(ev.Seq); err != nil {
				return fmt.Errorf("worker %s: discard: %w", p.InstanceID, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("worker %s: discard: %w", p.InstanceID, ctx.Err())
		}
	}
}
