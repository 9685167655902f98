// Package serverstore is the server's durable state: one bbolt file
// (FileName) under the server's state directory (DESIGN.md decision 5),
// holding
//
//   - tasks: each tracked task and its review (state, rejects, feedback
//     history, latest task_done, verdict, disposition);
//   - task_done deliveries: the dedupe keys and the reports whose
//     notification to the application is pending;
//   - the instance registry: every worker instance the server tracks;
//   - one session projection per machine (opaque JSON from the session
//     package);
//   - agents directory entries added at run time (name → addresses).
//
// The trust decisions of transport/trust live in the same file, in their
// own bucket: trust.New(st.DB(), serverstore.TrustBucket).
//
// Values are JSON. Every change is atomic, committed and fsynced before
// the method returns, so a kill -9 at any moment loses nothing a method
// reported done and never leaves half a change. Update runs several
// changes (a task's review state and its instance's state) as one.
//
// Every change goes through one write queue (Queue), committed by one
// goroutine in the order queued; changes that wait at the same time share
// a transaction, and so an fsync. Queue does not block: a caller queues a
// change while it holds a lock others need, and waits for it
// (Pending.Wait) once it released the lock.
//
// # Delivering task_done at least once, with a stable key
//
// The agent keeps each task_done in its outbox and re-sends it, with the
// same seq, until it receives task_done_ack; the application must hear of
// every report, across server restarts and kill -9 at any moment (AC-3.5),
// and hears of one twice only when the server died while telling it, with
// the same key both times. The server:
//
//  1. At start, before connecting to any agent, hands every report of
//     PendingNotifications to the application, calling MarkNotified after
//     each.
//  2. On a task_done frame, calls RecordTaskDone. It fails: do not ack
//     (the agent re-sends). A duplicate: ack, nothing else. A new report:
//     it is now recorded as pending notification, in the same transaction
//     as its dedupe key (and whatever onFirst changed, such as the review
//     state); ack it, notify the application, then call MarkNotified.
//     The ack may go before or after the notification: the report is
//     durable either way.
//
// The guarantee, relative to MarkNotified: a recorded report is handed to
// the application until MarkNotified(key) has committed, and never after.
// A crash between the start of the application's handler and MarkNotified
// hands the report to the application again after the restart (at least
// once, same key), so an application that must act exactly once records
// the report's key in the same transaction as its effect and skips a key
// it has recorded (package fleet exports the key as TaskKey). A
// report the application was told of and that MarkNotified recorded is
// never handed out again, whatever the agent replays, as long as its key
// is retained (below).
//
// # Pruning dedupe keys
//
// MarkNotified drops the report itself and keeps only its key. Keys are
// pruned, oldest notification first, when more than Retention.MaxKeys are
// kept (default DefaultDedupeKeys, 100,000; that many make a file of about
// 55 MB, measured) or when their notification is older than
// Retention.MaxAge (default DefaultDedupeAge, 30 days); Open and
// MarkNotified prune, and Prune does on demand. Keys
// whose notification is pending are never pruned. The agent deletes its
// outbox entry when it receives the ack, so a duplicate only arrives when
// an ack was lost, and the agent re-sends it on its next connection: the
// bound only has to outlive the longest time an agent stays away with an
// unacknowledged report. A replay of a pruned key counts as a new report.
package serverstore
