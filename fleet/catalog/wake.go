package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"example.com/pifleet/fleet/controlapi"
)

// seenCap bounds the keys a wake stream remembers to drop repeats (the
// overlap of the pending listing with live changes, a relisting after the
// stream lost changes).
const seenCap = 4096

// Wakes subscribes to the wakes of the orchestrator: one per durable
// task_done and one per escalation; a key names each, so that a repeat
// (the overlap below, or a task_done the fleet hands out again after a
// crash of the server) can be dropped.
// With pending, the wakes of the tasks now awaiting review or a human are
// returned first. When the fleet reports that the subscription lost
// changes, the tasks are listed again, so a lost task_done still wakes.
func (c *Catalog) Wakes(ctx context.Context, pending bool) ([]controlapi.Wake, <-chan controlapi.Wake, error) {
	changes, err := c.f.Watch(ctx) // before the listing: nothing falls between
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	var order []string
	fresh := func(w controlapi.Wake) bool {
		if seen[w.Key] {
			return false
		}
		seen[w.Key] = true
		order = append(order, w.Key)
		if len(order) > seenCap {
			delete(seen, order[0])
			order = order[1:]
		}
		return true
	}
	var first []controlapi.Wake
	if pending {
		ts, err := c.f.Tasks(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range ts {
			if w, ok := wakeOfTask(t); ok && fresh(w) {
				first = append(first, w)
			}
		}
	}
	out := make(chan controlapi.Wake, 16)
	go func() {
		defer close(out)
		send := func(ws ...controlapi.Wake) bool {
			for _, w := range ws {
				if !fresh(w) {
					continue
				}
				select {
				case out <- w:
				case <-ctx.Done():
					return false
				}
			}
			return true
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ch, ok := <-changes:
				if !ok {
					return
				}
				var ws []controlapi.Wake
				switch ch.Kind {
				case controlapi.ChangeDropped:
					ts, err := c.f.Tasks(ctx)
					if err != nil {
						continue
					}
					for _, t := range ts {
						if w, ok := wakeOfTask(t); ok {
							ws = append(ws, w)
						}
					}
				case controlapi.ChangeTaskDone:
					var d controlapi.TaskDone
					if err := json.Unmarshal(ch.Data, &d); err != nil {
						continue
					}
					t := controlapi.Task{ID: ch.TaskID, InstanceID: ch.InstanceID, Agent: ch.Agent, LastDone: &d}
					if ts, err := c.f.Tasks(ctx); err == nil {
						for _, x := range ts {
							if x.ID == ch.TaskID {
								t.Rejects, t.MaxRejects, t.Prompt, t.State = x.Rejects, x.MaxRejects, x.Prompt, x.State
							}
						}
					}
					if taskEnded(t.State) {
						ws = append(ws, endedWake(t, c.instanceOf(ctx, t.InstanceID)))
					} else {
						ws = append(ws, doneWake(t))
					}
				case controlapi.ChangeEscalated:
					ts, err := c.f.Tasks(ctx)
					if err != nil {
						continue
					}
					for _, t := range ts {
						if t.ID == ch.TaskID {
							ws = append(ws, escalatedWake(t))
						}
					}
				}
				if !send(ws...) {
					return
				}
			}
		}
	}()
	return first, out, nil
}

// wakeOfTask is the wake a task waiting for a decision stands for.
func wakeOfTask(t controlapi.Task) (controlapi.Wake, bool) {
	switch {
	case t.State == taskAwaitingReview && t.LastDone != nil:
		return doneWake(t), true
	case t.State == taskEscalated:
		return escalatedWake(t), true
	}
	return controlapi.Wake{}, false
}

func seqOf(t controlapi.Task) int64 {
	if t.LastDone == nil {
		return 0
	}
	return t.LastDone.Seq
}

func seqText(n int64) string { return strconv.FormatInt(n, 10) }

// doneWake tells the model that a task finished a run and awaits review.
func doneWake(t controlapi.Task) controlapi.Wake {
	d := t.LastDone
	var b strings.Builder
	fmt.Fprintf(&b, "pifleet: task %s on worker %s", t.ID, t.InstanceID)
	if t.Agent != "" {
		fmt.Fprintf(&b, " (host %s)", label(t.Agent))
	}
	fmt.Fprintf(&b, " finished a run (%s) and awaits your review.", label(d.Status))
	if t.Rejects > 0 {
		fmt.Fprintf(&b, " It is the revision after rejection %d of at most %d.", t.Rejects, t.MaxRejects)
	}
	fmt.Fprintf(&b, "\nVerify the work before you decide: remote_output shows what the worker did, and remote_prompt "+
		"instanceId=%s can ask it for evidence (run the tests, show the diff). Then call remote_accept taskId=%s, "+
		"or remote_reject taskId=%s with feedback.\n", t.InstanceID, t.ID, t.ID)
	msg := d.LastAssistantMessage
	if msg == "" {
		msg = d.Summary
	}
	b.WriteString(untrusted("worker's final message", cutHead(msg, MaxResultChars)))
	return controlapi.Wake{Key: t.ID + ":" + seqText(d.Seq), Kind: controlapi.WakeTaskDone, TaskID: t.ID, InstanceID: t.InstanceID,
		Agent: t.Agent, Seq: d.Seq, Status: d.Status, Text: b.String()}
}

// taskEnded: the task is final without a verdict to give (its run was
// aborted, its worker stopped or died, its prompt was lost), or already
// decided: a task_done for it asks for no review.
func taskEnded(state string) bool {
	switch state {
	case taskAborted, taskStopped, taskFailed, taskClosed:
		return true
	}
	return false
}

// instanceOf is the instance's entry in the fleet's status (the zero
// Instance when the status cannot be read or no longer lists it).
func (c *Catalog) instanceOf(ctx context.Context, id string) controlapi.Instance {
	st, err := c.f.Status(ctx)
	if err != nil {
		return controlapi.Instance{}
	}
	for _, in := range st.Instances {
		if in.ID == id {
			return in
		}
	}
	return controlapi.Instance{}
}

// endedWake tells the model that a task it waits for ended without a
// result to review: a worker killed mid-run still ends its run with a
// task_done, and without this the model would be asked for a verdict the
// fleet refuses, or, seeing none come, wait for the task for ever.
func endedWake(t controlapi.Task, in controlapi.Instance) controlapi.Wake {
	d := t.LastDone
	var b strings.Builder
	fmt.Fprintf(&b, "pifleet: task %s on worker %s", t.ID, t.InstanceID)
	if t.Agent != "" {
		fmt.Fprintf(&b, " (host %s)", label(t.Agent))
	}
	fmt.Fprintf(&b, " ended without a result to review: it is %s (its last run: %s); there is nothing to accept or reject.",
		label(t.State), label(d.Status))
	fmt.Fprintf(&b, "\nremote_output instanceId=%s shows what the worker did before the end. ", t.InstanceID)
	switch {
	case in.State == instanceStopped:
		b.WriteString("Its worker has stopped and takes no more prompts: to carry the task on, start a worker with " +
			"remote_spawn and prompt it.\n")
	case in.State != "":
		fmt.Fprintf(&b, "Its worker is %s: remote_prompt instanceId=%s gives it the task again, or remote_stop ends it.\n",
			label(in.State), t.InstanceID)
	default:
		b.WriteString("To carry the task on, prompt a worker with it (fleet_status lists them).\n")
	}
	if in.EndReason != "" {
		b.WriteString(untrusted("why the worker ended", cutHead(in.EndReason, MaxResultChars)))
	}
	msg := d.LastAssistantMessage
	if msg == "" {
		msg = d.Summary
	}
	b.WriteString(untrusted("worker's final message", cutHead(msg, MaxResultChars)))
	return controlapi.Wake{Key: t.ID + ":" + seqText(d.Seq), Kind: controlapi.WakeTaskDone, TaskID: t.ID, InstanceID: t.InstanceID,
		Agent: t.Agent, Seq: d.Seq, Status: d.Status, Text: b.String()}
}

// escalatedWake tells the model that a task now waits for a human.
func escalatedWake(t controlapi.Task) controlapi.Wake {
	text := fmt.Sprintf("pifleet: task %s on worker %s was rejected %d times (the limit is %d) and is escalated: it waits "+
		"for a human's decision. Tell the user what the task is and why you rejected it; do not accept, reject or "+
		"re-prompt it yourself. The user decides with pifleet-server accept %s or pifleet-server reject %s FEEDBACK.",
		t.ID, t.InstanceID, t.Rejects, t.MaxRejects, t.ID, t.ID)
	return controlapi.Wake{Key: t.ID + ":escalated:" + seqText(seqOf(t)), Kind: controlapi.WakeEscalated, TaskID: t.ID,
		InstanceID: t.InstanceID, Agent: t.Agent, Seq: seqOf(t), Text: text}
}
