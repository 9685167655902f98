package dialer

import (
	"sync/atomic"
	"time"
)

// TargetStatus is what the dialer knows about one tracked target, for
// status pages and the CLI. It is a copy: holding it holds no lock.
type TargetStatus struct {
	ID    string `json:"id"`
	State State  `json:"state"`
	// Addresses are the target's addresses, sorted; AddrIndex is the one
	// the next dial uses.
	Addresses []string `json:"addresses"`
	AddrIndex int      `json:"addrIndex"`
	// Attempts counts failures since the last reset.
	Attempts int `json:"attempts"`
	// RetryDelay is the current backoff (zero after a reset).
	RetryDelay time.Duration `json:"retryDelay"`
	// NextDial is when the target falls due: its next dial in NeedsDial,
	// its survival check in Connected. Zero while Dialing, and while it
	// waits for a dial of an earlier record of the same id to return.
	NextDial time.Time `json:"nextDial,omitzero"`
	// ConnectedAt is when the current connection was made (Connected only).
	ConnectedAt time.Time `json:"connectedAt,omitzero"`
	// LastError is the last failure since the last reset ("" when none).
	LastError string `json:"lastError,omitempty"`
}

// Stats are the dialer's counters and gauges. Counters only grow over the
// dialer's life.
type Stats struct {
	// Tracked is the number of targets with a record (gauge).
	Tracked int `json:"tracked"`
	// InFlight is the number of dials running now (gauge); it never exceeds
	// Config.PoolSize.
	InFlight int `json:"inFlight"`
	// Queued is the number of dispatched dials waiting for a pool slot (gauge).
	Queued int `json:"queued"`

	DialsStarted   uint64 `json:"dialsStarted"`
	DialsSucceeded uint64 `json:"dialsSucceeded"`
	DialsFailed    uint64 `json:"dialsFailed"`
	// PoolFull counts targets backed off because the pool and queue were full.
	PoolFull uint64 `json:"poolFull"`
	// FastFailures counts connections lost within FastFailureWindow.
	FastFailures uint64 `json:"fastFailures"`
	// Removals counts records dropped, for any reason (survived, deleted,
	// no endpoints).
	Removals uint64 `json:"removals"`
}

// counters back Stats. The loop writes them; Stats reads them from any
// goroutine without waiting for the loop.
type counters struct {
	tracked, inFlight, queued                  atomic.Int64
	started, succeeded, failed, poolFull, fast atomic.Uint64
	removals                                   atomic.Uint64
}

func (c *counters) load() Stats {
	return Stats{
		Tracked:        int(c.tracked.Load()),
		InFlight:       int(c.inFlight.Load()),
		Queued:         int(c.queued.Load()),
		DialsStarted:   c.started.Load(),
		DialsSucceeded: c.succeeded.Load(),
		DialsFailed:    c.failed.Load(),
		PoolFull:       c.poolFull.Load(),
		FastFailures:   c.fast.Load(),
		Removals:       c.removals.Load(),
	}
}
