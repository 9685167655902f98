// Package dialer keeps a set of targets connected by dialling them, the way
// OpenZiti's controller keeps its routers connected (its CtrlDialer).
// pifleet's server uses it to keep
// its agents connected; nothing in it knows about agents.
//
// # Model
//
// A Directory lists the targets, says which are eligible, gives their
// addresses and whether each is connected; a DialFunc dials one target at
// one address. A target that needs a connection gets a record whose state
// follows Table:
//
//	None → NeedsDial → Dialing → Connected → Removed
//
// A record is created by a scan (when DialDelay ends, then every
// ScanInterval; the new records' first dials are ScanSpread apart), by
// Dialer.Updated, or by Dialer.Disconnected. When its time comes it is
// dialled by a pool of at most PoolSize dials (QueueSize more may wait for
// a slot). A failed dial, or a full pool, backs the target off and rotates
// to its next address; a successful one keeps the backoff and watches the
// connection for FastFailureWindow. A connection lost within the window is a
// fast failure and the backoff continues; one that survives the window
// resets the backoff and the record is dropped, as is the record of a
// deleted target or one that no longer needs a dial. A connection lost later
// is redialled at once from the first address. A connection the target made
// itself (Dialer.Connected) resets the backoff.
//
// # Backoff
//
// The retry delay follows OpenZiti's recurrence (Config.NextRetryDelay):
// the previous delay times a factor drawn from [F-0.5, F+0.5) and raised to
// 1, clamped to [MinRetryInterval, MaxRetryInterval]. The first failure
// yields MinRetryInterval and delays never decrease. The project's backoff
// library, github.com/jpillora/backoff, computes Min·Factorⁿ from an attempt
// count with additive jitter from the global random source; it can express
// neither a recurrence on the previous delay nor an injected random source,
// so this package does not use it. Inject a seeded source with WithRand for
// reproducible schedules.
//
// # Fixed upstream weaknesses
//
// The upstream dialer had a handful of bugs; each fix here has
// a regression test named TestFix…:
//
//   - the loop sleeps until the next record is due instead of polling every
//     5 s, so retries happen when the backoff says;
//   - a record is on the retry heap at most once (it knows its index) and
//     leaves it when the record is removed;
//   - a deleted and re-created id never has two dials in flight: the new
//     record waits for the old dial to return;
//   - a repeated disconnect report does not reset a fast-failure backoff;
//   - a connection report that follows the dialer's own dial does not wipe
//     the fast-failure accounting, and a dial error after the target dialled
//     in is ignored;
//   - addresses are sorted, so rotation is meaningful, and the dial gets its
//     address by value;
//   - notifications never block: not during DialDelay, not while the loop is
//     busy, not when the pool is full;
//   - the configuration is validated, with errors naming the field.
//
// # Inspection
//
// Dialer.Snapshot lists every tracked target (state, attempts, retry delay,
// next dial, address index, last error); Dialer.Stats returns counters
// without waiting for the loop; every transition is logged through the
// zerolog logger given with WithLogger.
package dialer
