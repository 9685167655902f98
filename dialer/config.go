package dialer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Config tunes a Dialer. Start from DefaultConfig and change what you need:
// New rejects an invalid Config rather than guessing what a zero field
// meant (a zero DialDelay, for one, is a legitimate choice).
type Config struct {
	// MinRetryInterval is the floor of the retry delay, and therefore the
	// delay after the first failure of a target with no backoff yet.
	MinRetryInterval time.Duration
	// MaxRetryInterval caps the retry delay.
	MaxRetryInterval time.Duration
	// RetryBackoffFactor multiplies the retry delay on every failure. Each
	// failure draws the factor uniformly from [F-0.5, F+0.5) and raises it
	// to 1 if below, so the delay never shrinks.
	RetryBackoffFactor float64
	// FastFailureWindow separates the two kinds of lost connection. One
	// lost sooner than this after it was made is a fast failure: the backoff
	// continues as after a failed dial, so a target that accepts and then
	// drops at once is not redialled in a tight loop. One that lived longer
	// resets the backoff and is redialled at once. A connection that lives
	// through the window stops being tracked.
	FastFailureWindow time.Duration
	// DialDelay holds every dial back for this long after Run starts, so a
	// booting server gives agents a chance to dial in first. Notifications
	// are recorded meanwhile; they are acted on when the delay ends.
	DialDelay time.Duration
	// PoolSize is the most dials in flight at once.
	PoolSize int
	// QueueSize is how many dispatched dials may wait for a free slot of
	// the pool. A target that falls due when the pool and the queue are both
	// full is backed off as "pool full", exactly like a failed dial.
	QueueSize int
	// ScanInterval is the period of the full scan of Directory.Targets that
	// follows the first one (made when DialDelay ends). It picks up targets
	// that were added without a notification.
	ScanInterval time.Duration
	// ScanSpread spaces the first dials of the targets one scan discovers,
	// in the directory's order, so a boot with many targets does not dial
	// them all in the same instant.
	ScanSpread time.Duration
}

// DefaultConfig returns OpenZiti's defaults (1 s to 5 min, factor 1.5,
// fast-failure window 5 s, dial delay 30 s) and OpenZiti's pool of 10
// dials with a queue of 32, an hourly scan and a 50 ms spread.
func DefaultConfig() Config {
	return Config{
		MinRetryInterval:   time.Second,
		MaxRetryInterval:   5 * time.Minute,
		RetryBackoffFactor: 1.5,
		FastFailureWindow:  5 * time.Second,
		DialDelay:          30 * time.Second,
		PoolSize:           10,
		QueueSize:          32,
		ScanInterval:       time.Hour,
		ScanSpread:         50 * time.Millisecond,
	}
}

// ErrInvalidConfig is matched (errors.Is) by every *ConfigError.
var ErrInvalidConfig = errors.New("dialer: invalid configuration")

// ConfigError names one field of a Config that is out of range.
type ConfigError struct {
	Field  string // the Config field, e.g. "MaxRetryInterval"
	Value  any    // the rejected value
	Reason string // what it must be instead
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("dialer: config %s = %v: %s", e.Field, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Validate reports every field that is out of range, as *ConfigError values
// joined with errors.Join (errors.As finds the first). A zero or negative
// MinRetryInterval is rejected because a zero delay compounds to zero and
// would redial a failing target in a tight loop.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, value any, reason string) {
		errs = append(errs, &ConfigError{Field: field, Value: value, Reason: reason})
	}
	if c.MinRetryInterval <= 0 {
		bad("MinRetryInterval", c.MinRetryInterval, "must be positive")
	}
	if c.MaxRetryInterval < c.MinRetryInterval {
		bad("MaxRetryInterval", c.MaxRetryInterval, fmt.Sprintf("must not be below MinRetryInterval (%v)", c.MinRetryInterval))
	}
	if math.IsNaN(c.RetryBackoffFactor) || math.IsInf(c.RetryBackoffFactor, 0) || c.RetryBackoffFactor < 1 {
		bad("RetryBackoffFactor", c.RetryBackoffFactor, "must be a finite number of at least 1")
	}
	if c.FastFailureWindow < 0 {
		bad("FastFailureWindow", c.FastFailureWindow, "must not be negative")
	}
	if c.DialDelay < 0 {
		bad("DialDelay", c.DialDelay, "must not be negative")
	}
	if c.PoolSize < 1 {
		bad("PoolSize", c.PoolSize, "must be positive")
	}
	if c.QueueSize < 1 {
		bad("QueueSize", c.QueueSize, "must be positive")
	}
	if c.ScanInterval <= 0 {
		bad("ScanInterval", c.ScanInterval, "must be positive")
	}
	if c.ScanSpread < 0 {
		bad("ScanSpread", c.ScanSpread, "must not be negative")
	}
	return errors.Join(errs...)
}

// NextRetryDelay returns the retry delay after one more failure, given the
// delay before it (zero for a target with no backoff yet). It is OpenZiti's
// recurrence:
//
//	factor = RetryBackoffFactor + U[-0.5, 0.5), raised to 1 if below
//	delay  = clamp(prev × factor, MinRetryInterval, MaxRetryInterval)
//
// so the first failure always yields MinRetryInterval, the delay never
// decreases, and the jitter compounds. rng supplies the uniform draw (one
// Float64 per call); inject a seeded one for reproducible schedules.
//
// This is not github.com/jpillora/backoff, which computes Min×Factorⁿ from
// an attempt number, adds its jitter between Min and that envelope (so
// delays can shrink), and draws from the global random source. It cannot
// express a recurrence on the previous delay nor take an injected source,
// so this package does not use it.
func (c Config) NextRetryDelay(prev time.Duration, rng *rand.Rand) time.Duration {
	factor := c.RetryBackoffFactor + rng.Float64() - 0.5
	if factor < 1 {
		factor = 1
	}
	// Multiply in float64 and clamp before converting back, so a delay
	// near MaxInt64 cannot overflow.
	next := float64(prev) * factor
	if next < float64(c.MinRetryInterval) {
		return c.MinRetryInterval
	}
	if next > float64(c.MaxRetryInterval) {
		return c.MaxRetryInterval
	}
	return time.Duration(next)
}
