// Package agentstore is the agent's durable state: one bbolt file under
// the agent's state directory (DESIGN.md decision 5), holding
//
//   - the outbox of task_done frames (seed state-flow §7, reference 1.10,
//     AC-3.5/3.6): written before the first send, replayed on every new
//     connection and on a retry schedule while unacknowledged, removed by
//     the matching task_done_ack;
//   - the instance registry: what the agent must know to re-adopt a worker
//     whose shim outlived it, or to report it lost (decision 6, reference
//     1.13);
//   - a small key/value space for cursors and similar bookkeeping.
//
// Every change is one bbolt transaction, committed (and fsynced) before the
// method returns, so a kill -9 at any moment loses nothing a method
// reported done, and never leaves half a change behind.
//
// # Sequence numbers
//
// Put assigns each task_done its seq: max(last seq + 1, wall clock in ms).
// Values stay comparable with the TypeScript agent's millisecond
// timestamps, yet are strictly increasing for the life of the file, even
// when the clock goes backwards, and so are never reused; the last seq is
// stored in the same transaction as the entry. A seq is an integer below
// 2^53, so it survives a round trip through a JSON number (a float64)
// exactly. The server deduplicates on (instanceId, taskId, seq).
//
// # Delivery bookkeeping
//
// The store does not send anything. The agent sends each entry returned by
// Due (or Pending, on a new connection) and then calls MarkSent, which
// counts the attempt and schedules the next one after RetryPolicy's delay
// (jpillora/backoff ForAttempt, measured from the injected clock). Ack
// deletes the entry. An entry's Owner names the connection that submitted
// the task: a hint for the first attempt only, never a condition.
package agentstore
