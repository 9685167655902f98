package fleet

import (
	"context"
	"errors"
	"fmt"

	"example.com/pifleet/transport"
)

// queueFullError is a TrySend that found the agent connection's send
// queue full. It matches transport.ErrSendQueueFull.
type queueFullError struct{ conn *transport.Conn }

func (e *queueFullError) Error() string { return transport.ErrSendQueueFull.Error() }
func (e *queueFullError) Unwrap() error { return transport.ErrSendQueueFull }

// trySend queues fr on c without waiting; a full queue is a
// *queueFullError naming c, for whileQueueFull to wait on.
func trySend(c *transport.Conn, fr transport.Frame) error {
	err := c.TrySend(fr)
	if errors.Is(err, transport.ErrSendQueueFull) {
		return &queueFullError{conn: c}
	}
	return err
}

// whileQueueFull runs attempt with f.mu held, and again each time it
// failed only because an agent connection's send queue was full: then it
// waits for room with the lock released (an agent that is slow to read
// must not hold up the fleet), as long as ctx allows. attempt looks
// everything up afresh and queues its frames with trySend before it
// changes any state, so a failed attempt leaves nothing half done.
//
// When ctx ends first, the error wraps ctx.Err() and says what waited.
func (f *Fleet) whileQueueFull(ctx context.Context, what string, attempt func() error) error {
	for {
		f.mu.Lock()
		err := attempt()
		f.mu.Unlock()
		var full *queueFullError
		if !errors.As(err, &full) {
			return err
		}
		// A connection that closes meanwhile fails the next attempt with
		// its own error.
		if err := full.conn.AwaitRoom(ctx); err != nil && ctx.Err() != nil {
			return fmt.Errorf("fleet: %s: the agent's send queue stayed full (the agent is not reading): %w", what, ctx.Err())
		}
	}
}
