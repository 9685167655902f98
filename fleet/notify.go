package fleet

import (
	"sync"

	"example.com/pifleet/fleet/internal/serverstore"
)

func reportOf(td serverstore.TaskDone, order uint64) TaskReport {
	seq := int64(td.Seq) // an integer on the wire (docs/protocol.md, task_done.seq)
	return TaskReport{
		Key:                  TaskKey{InstanceID: td.InstanceID, TaskID: td.TaskID, Seq: seq},
		TaskID:               td.TaskID,
		InstanceID:           td.InstanceID,
		Seq:                  seq,
		Status:               td.Status,
		Summary:              td.Summary,
		LastAssistantMessage: td.LastAssistantMessage,
		TraceID:              td.TraceID,
		Order:                order,
		Worktree:             diffStatOf(td.Worktree),
	}
}

// queuedReport is a report waiting for the notifier, with the key the
// store knows its task_done by.
type queuedReport struct {
	r   TaskReport
	key serverstore.DedupeKey
}

// notifyQueue holds the task_done reports received and not yet handed to
// the application, in receipt order.
//
// Its lock guards the queue and its closed flag only. It is a leaf: it is
// never taken with Fleet.mu held, and nothing else is locked while it is
// held (the notifier calls the application after releasing it).
type notifyQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	q      []queuedReport
	closed bool // Close: the notifier finishes the queue and returns
}

func newNotifyQueue() *notifyQueue {
	n := &notifyQueue{}
	n.cond = sync.NewCond(&n.mu)
	return n
}

// push queues r for the notifier.
func (n *notifyQueue) push(r queuedReport) {
	n.mu.Lock()
	n.q = append(n.q, r)
	n.cond.Signal()
	n.mu.Unlock()
}

// next waits for the oldest queued report; false once the queue is
// closed and empty.
func (n *notifyQueue) next() (queuedReport, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for len(n.q) == 0 && !n.closed {
		n.cond.Wait()
	}
	if len(n.q) == 0 {
		return queuedReport{}, false
	}
	q := n.q[0]
	n.q = n.q[1:]
	return q, true
}

// close lets next return false once the queue is empty.
func (n *notifyQueue) close() {
	n.mu.Lock()
	n.closed = true
	n.cond.Broadcast()
	n.mu.Unlock()
}

func (f *Fleet) enqueueReport(td serverstore.TaskDone, order uint64) {
	f.notify.push(queuedReport{r: reportOf(td, order), key: td.Key()})
}

// notifier hands each report to the application, in receipt order, then
// records the notification, so that a restart hands over again only the
// reports whose notification was not recorded (at least once). At Close
// it finishes the reports already queued, so that Close returns with
// every received report either notified or still pending in the store.
func (f *Fleet) notifier() {
	defer f.wg.Done()
	for {
		q, ok := f.notify.next()
		if !ok {
			return
		}
		r := q.r
		if f.cfg.OnTaskDone != nil {
			f.cfg.OnTaskDone(r)
		}
		f.subs.publish(Change{Kind: ChangeTaskDone, InstanceID: r.InstanceID, TaskID: r.TaskID, Report: &r})
		if err := f.store.MarkNotified(q.key); err != nil {
			f.log.Error().Err(err).Str("key", r.Key.String()).Msg("record task_done notification")
		}
	}
}
