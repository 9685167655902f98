package dialer

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"example.com/pifleet/internal/fsmkit"
)

// ErrPoolFull is the last error of a target that fell due while the pool
// and its queue were full.
var ErrPoolFull = errors.New("dialer: dial pool and queue full")

// ErrFastFailure is the last error of a target whose connection was lost
// within FastFailureWindow of being made.
var ErrFastFailure = errors.New("dialer: connection lost within the fast-failure window")

// instant is a point in time as an offset from the loop's epoch (a
// monotonic reading taken when Run starts). It is half the size of a
// time.Time and compares with one instruction, which matters on the heap.
type instant = time.Duration

// record is the dialer's state for one tracked target. It is owned by the
// loop goroutine; nothing else reads or writes it.
type record struct {
	id      string
	m       fsmkit.Machine[State, Event]
	addrs   []string // sorted, without duplicates
	lastErr error
	job     *dialJob // the dial this record dispatched, while Dialing

	retryDelay  time.Duration
	nextDial    instant // when the record falls due (valid while on the heap)
	connectedAt instant
	order       uint64 // creation order; breaks ties on the heap

	heapIndex int32 // position on the retry heap, -1 when absent
	addrIndex int32
	attempts  int32

	// connectPending: a connection was reported while our own dial was in
	// flight. It is resolved by the dial's result (see engine.result).
	connectPending bool
	// waiting: due, but a dial dispatched by an earlier record of the same
	// id (deleted and re-created since) is still running. The record waits
	// off the heap until that dial returns.
	waiting bool
}

// dialJob is one dispatched dial. The address is copied in at dispatch, so
// the goroutine that dials shares nothing with the record.
type dialJob struct {
	id, addr string
	ctx      context.Context
	cancel   context.CancelFunc // set when the dial starts
	started  bool               // running (not just queued)
	dropped  bool               // record removed while queued: never start
}

func (r *record) state() State { return r.m.State() }

// address returns the address the next dial uses.
func (r *record) address() string { return r.addrs[r.addrIndex] }

// failed applies the seed's dial-failed rule (to a failed dial, a full pool
// and a fast failure alike): one more attempt, the delay grows by the
// jittered factor within [Min, Max], the next dial is that far from now,
// and the address rotates.
func (r *record) failed(now instant, cfg *Config, rng *rand.Rand, err error) {
	r.attempts++
	r.retryDelay = cfg.NextRetryDelay(r.retryDelay, rng)
	r.nextDial = now + r.retryDelay
	if n := int32(len(r.addrs)); n > 0 {
		r.addrIndex = (r.addrIndex + 1) % n
	}
	r.lastErr = err
}

// succeeded applies the seed's dial-succeeded rule: the retry delay is kept
// (a fast failure continues from it) and the survival check falls due when
// the fast-failure window ends.
func (r *record) succeeded(now instant, cfg *Config) {
	r.connectedAt = now
	r.nextDial = now + cfg.FastFailureWindow
}

// lostIsFast reports whether a connection lost now was lost within the
// fast-failure window; only a Connected record has a connection to lose.
func (r *record) lostIsFast(now instant, cfg *Config) bool {
	return r.state() == StateConnected && now-r.connectedAt < cfg.FastFailureWindow
}

// reset applies the seed's normal-disconnect rule: no backoff, first
// address, due now.
func (r *record) reset(now instant) {
	r.retryDelay = 0
	r.attempts = 0
	r.addrIndex = 0
	r.nextDial = now
	r.lastErr = nil
}

// connectedExternally applies the seed's rule for a connection the target
// made itself: backoff zeroed, survival check after the window.
func (r *record) connectedExternally(now instant, cfg *Config) {
	r.retryDelay = 0
	r.attempts = 0
	r.lastErr = nil
	r.connectedAt = now
	r.nextDial = now + cfg.FastFailureWindow
}

// setAddrs replaces the address list with a fresh sorted one. The index
// keeps pointing at the same address when it is still offered; otherwise it
// wraps into the new list, as upstream's modulo clamp does.
func (r *record) setAddrs(addrs []string) {
	if len(addrs) == 0 {
		return // callers remove a record without addresses instead
	}
	if len(r.addrs) > 0 && &addrs[0] == &r.addrs[0] && len(addrs) == len(r.addrs) {
		return // the very same list
	}
	var idx int32
	if len(r.addrs) > 0 {
		if i, found := slices.BinarySearch(addrs, r.address()); found {
			idx = int32(i)
		} else {
			idx = r.addrIndex % int32(len(addrs))
		}
	}
	r.addrs = addrs
	r.addrIndex = idx
}

// normalizeAddrs returns addrs sorted and without duplicates, reusing prev
// (already normalised) when it holds the same addresses, so a steady
// directory costs no allocation. addrs itself is never retained: the
// directory may reuse it.
func normalizeAddrs(addrs, prev []string) []string {
	if slices.Equal(addrs, prev) {
		return prev
	}
	out := slices.Clone(addrs)
	slices.Sort(out)
	return slices.Clip(slices.Compact(out))
}
