package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A catch-up the agent failed is retried a bounded number of times, the
// n-th after 0.5 s to 0.5 s·2^n (jittered, at most 30 s); one that cannot
// succeed before the next full report (agent away, not pifleet, registry
// not synced, fleet closing) is not retried at all.
func TestCatchUpRetriesAreBounded(t *testing.T) {
	transient := []error{
		&FileError{Op: "session_entries", Code: "io_error", Message: "disk"},
		fmt.Errorf("request: %w", context.DeadlineExceeded),
	}
	for _, err := range transient {
		retry := catchUpBackoff()
		var waits []time.Duration
		for {
			d, again := retryCatchUp(retry, err)
			if !again {
				break
			}
			// Jittered between 0.5 s and 0.5 s·2^n.
			if most := min(500*time.Millisecond<<len(waits), 30*time.Second); d < 500*time.Millisecond || d > most {
				t.Fatalf("%v: retry %d waits %v, want 0.5 s to %v", err, len(waits)+1, d, most)
			}
			waits = append(waits, d)
			if len(waits) > catchUpRetries {
				t.Fatalf("%v: more than %d retries", err, catchUpRetries)
			}
		}
		if len(waits) != catchUpRetries {
			t.Fatalf("%v: %d retries, want %d", err, len(waits), catchUpRetries)
		}
	}
	for _, err := range []error{nil, ErrNotSupported, context.Canceled, errors.New("agent w1 is not connected")} {
		if d, again := retryCatchUp(catchUpBackoff(), err); again {
			t.Fatalf("%v retried after %v", err, d)
		}
	}
}
