package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jpillora/backoff"

	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/fleet/agent/internal/worker"
	"example.com/pifleet/transport"
)

// finishTask stores f in the outbox (committed before anything is sent)
// and wakes the delivery loop, which sends it to owner first. A report
// that cannot be stored (a full or failing disk) is never dropped: it is
// kept in memory, in order with the ones after it, and written again by
// storeLoop until it is stored (see Health). It reports whether f is
// stored now.
func (a *Agent) finishTask(f *transport.TaskDoneFrame, owner string) (stored bool) {
	a.addWorktreeStat(f)
	a.storeMu.Lock()
	defer a.storeMu.Unlock()
	if len(a.unstored) == 0 {
		err := a.storeDone(f, owner)
		if err == nil {
			return true
		}
		a.storeFailedLocked(err, f.TaskID)
	}
	// Behind the ones already waiting: the outbox keeps the order.
	a.unstored = append(a.unstored, unstoredDone{frame: f, owner: owner})
	if a.hooks.taskDoneUnstored != nil {
		a.hooks.taskDoneUnstored(f.TaskID)
	}
	select {
	case a.storeKick <- struct{}{}:
	default:
	}
	return false
}

// unstoredDone is a task_done whose outbox write failed.
type unstoredDone struct {
	frame *transport.TaskDoneFrame
	owner string
}

// storeDone writes f to the outbox and, once it is there, lets it go.
func (a *Agent) storeDone(f *transport.TaskDoneFrame, owner string) error {
	e, err := a.store.Put(f, owner)
	if err != nil {
		return err
	}
	a.rememberTask(f.TaskID, f.InstanceID)
	if a.hooks.taskDone != nil {
		a.hooks.taskDone(e)
	}
	a.log.Info().Str("taskId", f.TaskID).Str("instanceId", f.InstanceID).Str("status", string(f.Status)).
		Uint64("seq", uint64(e.Seq)).Msg("task done")
	a.kickOutbox()
	return nil
}

// storeFailedLocked records a failed outbox write (storeMu held).
func (a *Agent) storeFailedLocked(err error, taskID string) {
	if a.storeErr == nil {
		a.storeErrSince = a.cfg.Now()
	}
	a.storeErr = err
	a.log.Error().Err(err).Str("taskId", taskID).Int("waiting", len(a.unstored)+1).
		Msg("cannot store task_done: it is kept in memory and written again until the disk takes it; free space in the state directory")
}

// Bounds of storeLoop's backoff between attempts.
const (
	storeRetryMin = 100 * time.Millisecond
	storeRetryMax = 10 * time.Second
)

// storeLoop writes the task_done frames that could not be stored again,
// oldest first, backing off from storeRetryMin to storeRetryMax between
// attempts, until every one is stored.
func (a *Agent) storeLoop(ctx context.Context) {
	b := &backoff.Backoff{Min: storeRetryMin, Max: storeRetryMax, Factor: 2}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			a.storeMu.Lock()
			if n := len(a.unstored); n > 0 {
				a.log.Error().Int("waiting", n).
					Msg("stopping with task_done reports not stored; a restarted agent reports their tasks again from its worker records")
			}
			a.storeMu.Unlock()
			return
		case <-a.storeKick:
		case <-timer.C:
		}
		a.storeMu.Lock()
		for len(a.unstored) > 0 {
			u := a.unstored[0]
			if err := a.storeDone(u.frame, u.owner); err != nil {
				a.storeErr = err
				a.log.Warn().Err(err).Int("waiting", len(a.unstored)).Msg("task_done still cannot be stored")
				break
			}
			a.unstored[0] = unstoredDone{}
			a.unstored = a.unstored[1:]
		}
		waiting := len(a.unstored)
		if waiting == 0 && a.storeErr != nil {
			a.log.Info().Dur("after", a.cfg.Now().Sub(a.storeErrSince)).Msg("task_done reports stored again: the state directory takes writes")
			a.storeErr = nil
		}
		a.storeMu.Unlock()
		if waiting == 0 {
			b.Reset()
			continue
		}
		timer.Reset(b.Duration())
	}
}

// Health is the agent's account of what it could not do on its own.
type Health struct {
	// UnstoredTaskDones counts the task reports the agent could not write
	// to its database (a full or failing disk). They are kept in memory
	// and written again until the disk takes them; none is sent, or can
	// be acknowledged, before that.
	UnstoredTaskDones int
	// StoreError is the last failed write of a task report ("" once every
	// report is stored), failing since StoreErrorSince.
	StoreError      string
	StoreErrorSince time.Time
}

// Health reports the agent's condition.
func (a *Agent) Health() Health {
	a.storeMu.Lock()
	defer a.storeMu.Unlock()
	h := Health{UnstoredTaskDones: len(a.unstored)}
	if a.storeErr != nil {
		h.StoreError, h.StoreErrorSince = a.storeErr.Error(), a.storeErrSince
	}
	return h
}

func (a *Agent) kickOutbox() {
	select {
	case a.outboxKick <- struct{}{}:
	default:
	}
}

// deliverLoop sends due outbox entries: at once when stored, then again on
// the retry schedule until acknowledged (not only on reconnect). With no
// server connected it waits for one (a new connection gets everything by
// its replay anyway).
func (a *Agent) deliverLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := time.Duration(-1)
		if a.deliverDue(ctx) {
			next, ok, err := a.store.NextDue()
			switch {
			case err != nil:
				a.log.Error().Err(err).Msg("outbox")
			case ok:
				wait = max(next.Sub(a.cfg.Now()), time.Millisecond)
			}
		}
		var tick <-chan time.Time
		if wait >= 0 {
			timer.Reset(wait)
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-a.outboxKick:
		case <-tick:
		}
		timer.Stop()
	}
}

// deliverDue sends every due entry: to its owner alone on the first
// attempt when the owner is connected, else to every connection. An entry
// is marked sent only when some connection took it. It reports whether any
// server is connected (else there is nothing to wait for but a new one).
// Deliveries and replays are serialised (deliverMu), and a connection still
// in its replay is left to it, so a new connection never gets an entry
// twice.
func (a *Agent) deliverDue(ctx context.Context) bool {
	a.deliverMu.Lock()
	defer a.deliverMu.Unlock()
	var peers []*peer
	for _, p := range a.peersSnapshot() {
		select {
		case <-p.sent:
			peers = append(peers, p)
		default:
		}
	}
	if len(peers) == 0 {
		return false
	}
	due, err := a.store.Due()
	if err != nil {
		a.log.Error().Err(err).Msg("outbox")
		return true
	}
	var sent []agentstore.Seq
	for _, e := range due {
		targets := peers
		if e.PreferOwner() {
			for _, p := range peers {
				if p.key == e.Owner {
					targets = []*peer{p}
					break
				}
			}
		}
		ok := false
		for _, p := range targets {
			// Never waits for one peer: a stalled one is dropped (offer).
			if a.offer(p, e.Frame) == nil {
				ok = true
			}
		}
		if ok {
			sent = append(sent, e.Seq)
		}
	}
	if len(sent) > 0 {
		if err := a.store.MarkSent(sent...); err != nil {
			a.log.Error().Err(err).Msg("outbox")
		}
	}
	return true
}

// replayOutbox sends every unacked task_done to a new connection, in seq
// order, and counts it as a delivery attempt.
func (a *Agent) replayOutbox(ctx context.Context, p *peer) {
	a.deliverMu.Lock()
	defer a.deliverMu.Unlock()
	pending, err := a.store.Pending()
	if err != nil {
		a.log.Error().Err(err).Msg("outbox replay")
		return
	}
	var sent []agentstore.Seq
	for _, e := range pending {
		// Not waiting here either: the replay holds deliverMu. What does
		// not fit now goes on the retry schedule.
		if err := p.conn.TrySend(e.Frame); err != nil {
			break
		}
		sent = append(sent, e.Seq)
	}
	if len(sent) > 0 {
		if err := a.store.MarkSent(sent...); err != nil {
			a.log.Error().Err(err).Msg("outbox")
		}
	}
}

// ack handles task_done_ack: the entry is removed, and never sent again.
func (a *Agent) ack(f *transport.TaskDoneAckFrame) {
	removed, err := a.store.Ack(f.TaskID, f.Seq)
	if err != nil {
		a.log.Error().Err(err).Str("taskId", f.TaskID).Msg("ack")
		return
	}
	a.log.Debug().Str("taskId", f.TaskID).Float64("seq", f.Seq).Bool("removed", removed).Msg("task_done acked")
}

// Task → instance bookkeeping, kept in the store so that task_accept and
// task_reject find the instance after an agent restart.
const taskKeyPrefix = "task/"

func (a *Agent) rememberTask(taskID, instanceID string) {
	if err := a.store.PutKV(taskKeyPrefix+taskID, []byte(instanceID)); err != nil {
		a.log.Warn().Err(err).Str("taskId", taskID).Msg("cannot remember the task's instance")
	}
}

func (a *Agent) taskInstance(taskID string) string {
	v, ok, err := a.store.GetKV(taskKeyPrefix + taskID)
	if err != nil || !ok {
		return ""
	}
	return string(v)
}

// workerKeyPrefix keys the handles that earlier versions stored in the
// database (fsynced on every write); they are still read, so that an
// upgrade re-adopts the workers it finds, and deleted with the instance.
const workerKeyPrefix = "worker/"

// persistWorker stores what re-adoption needs (see handleFiles: no fsync).
func (a *Agent) persistWorker(id string, w *worker.Worker) {
	if err := a.handles.put(id, w.Persisted); err != nil {
		a.log.Error().Err(err).Str("instanceId", id).Msg("cannot persist the worker's handle")
	}
}

func (a *Agent) persistedWorker(id string) (worker.Persisted, bool) {
	p, ok, err := a.handles.get(id)
	if err != nil {
		a.log.Warn().Err(err).Str("instanceId", id).Msg("cannot read the worker's handle")
		return p, false
	}
	if ok {
		return p, true
	}
	v, ok, err := a.store.GetKV(workerKeyPrefix + id)
	if err != nil || !ok || json.Unmarshal(v, &p) != nil {
		return p, false
	}
	return p, true
}
