package serverstore

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Bounds on what the store accepts.
const (
	// MaxIDBytes bounds task, instance and agent ids and machine names.
	MaxIDBytes = 512
	// MaxTextBytes bounds a stored prompt or feedback text; longer ones
	// are cut at a UTF-8 boundary and flagged truncated (the full text is
	// in the worker's session file).
	MaxTextBytes = 16 << 10
	// MaxAgentAddresses bounds the addresses of one agents entry.
	MaxAgentAddresses = 64
)

// ModelRef names a model: a provider, a model id, a thinking level.
type ModelRef struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	Thinking string `json:"thinking,omitempty"`
}

// TaskStats are the optional numbers of a task_done.
type TaskStats struct {
	Turns        *float64 `json:"turns,omitempty"`
	ToolCalls    *float64 `json:"toolCalls,omitempty"`
	FilesChanged *float64 `json:"filesChanged,omitempty"`
	Cost         *float64 `json:"cost,omitempty"`
}

// TaskDone is a task_done frame's content as the store keeps it.
type TaskDone struct {
	TaskID     string  `json:"taskId"`
	InstanceID string  `json:"instanceId"`
	Seq        float64 `json:"seq"`
	// Status is "settled", "budget_exceeded" or "aborted".
	Status               string     `json:"status"`
	Summary              string     `json:"summary"`
	LastAssistantMessage string     `json:"lastAssistantMessage,omitempty"`
	Stats                *TaskStats `json:"stats,omitempty"`
	TraceID              string     `json:"traceId,omitempty"`
	// Worktree is an isolated worker's branch, base and diff stat.
	Worktree *DiffStat `json:"worktree,omitempty"`
}

// Key returns the dedupe key of the task_done.
func (td TaskDone) Key() DedupeKey {
	return DedupeKey{InstanceID: td.InstanceID, TaskID: td.TaskID, Seq: td.Seq}
}

// Feedback is one rejection of a task.
type Feedback struct {
	At        time.Time `json:"at"`
	Text      string    `json:"text"`
	Truncated bool      `json:"truncated,omitempty"`
	// By says who rejected: "application" or "human".
	By string `json:"by"`
	// Delivered is set once the feedback was sent to the worker as a new
	// prompt; feedback not delivered yet is sent again after a reconnect.
	Delivered bool `json:"delivered"`
}

// Task is one tracked task and its review.
type Task struct {
	TaskID          string `json:"taskId"`
	InstanceID      string `json:"instanceId"`
	Machine         string `json:"machine"`
	Prompt          string `json:"prompt"`
	PromptTruncated bool   `json:"promptTruncated,omitempty"`
	TraceID         string `json:"traceId,omitempty"`
	// State mirrors the instance's review state (fleet.InstanceState
	// names: running, awaiting_review, verifying, accepted, revising,
	// escalated), or how the task ended outside a review (the SDK's
	// names, e.g. aborted).
	State      string     `json:"state"`
	Rejects    int        `json:"rejects"`
	MaxRejects int        `json:"maxRejects"`
	Feedback   []Feedback `json:"feedback,omitempty"`
	// PromptEventSeq is the seq of the agent's newest event the server
	// had seen when it sent the task's prompt (or its latest feedback):
	// a replay after a reconnect that misses no event after it shows
	// whether the run started.
	PromptEventSeq uint64 `json:"promptEventSeq,omitempty"`
	// LastDone is the latest new task_done of the task; RecordTaskDone
	// sets it.
	LastDone    *TaskDone `json:"lastDone,omitempty"`
	Verdict     string    `json:"verdict,omitempty"`
	Disposition string    `json:"disposition,omitempty"`
	// Delivery is how the work was delivered (isolated workers).
	Delivery  *WorkDelivery `json:"delivery,omitempty"`
	CreatedAt time.Time     `json:"createdAt"`
	UpdatedAt time.Time     `json:"updatedAt"`
}

// Instance is the server's record of one worker instance.
type Instance struct {
	InstanceID string    `json:"instanceId"`
	Machine    string    `json:"machine"`
	Cwd        string    `json:"cwd"`
	Bundle     string    `json:"bundle"`
	BundleHash string    `json:"bundleHash,omitempty"`
	Model      *ModelRef `json:"model,omitempty"`
	// ModelPinned: the agent refuses model changes (the bundle's
	// model.pin, or PinModel).
	ModelPinned bool `json:"modelPinned,omitempty"`
	// Worktree is the isolated worker's git worktree.
	Worktree *Worktree `json:"worktree,omitempty"`
	// State is the instance machine's state (fleet.InstanceState).
	State       string `json:"state"`
	SessionPath string `json:"sessionPath,omitempty"`
	TraceID     string `json:"traceId,omitempty"`
	// SpawnID is the id of the spawn request that started the worker.
	SpawnID string `json:"spawnId,omitempty"`
	// Degraded is set when the worker started from a stale cached bundle.
	Degraded bool `json:"degraded,omitempty"`
	// EndReason says why a stopped or failed instance ended when it was
	// not a graceful stop: "forced", "worker gone", a spawn_error code.
	EndReason        string `json:"endReason,omitempty"`
	LastSeenEventSeq uint64 `json:"lastSeenEventSeq"`
	// FromSession is the session the worker started from (seed §8) and
	// SessionMode how ("clone" or "attach"); StaleBaseline flags a
	// baseline whose repository's HEAD had moved at spawn (AC-3.5.6).
	FromSession   string `json:"fromSession,omitempty"`
	SessionMode   string `json:"sessionMode,omitempty"`
	StaleBaseline bool   `json:"staleBaseline,omitempty"`
	// SessionName is the name the server gave the worker's session
	// (task:<taskId>:<slug>); ReservedTaskID the task id that name uses
	// before the first task is submitted.
	SessionName    string `json:"sessionName,omitempty"`
	ReservedTaskID string `json:"reservedTaskId,omitempty"`
	// MirrorDone: the session's entries were mirrored after the instance
	// ended; nothing more will come.
	MirrorDone bool      `json:"mirrorDone,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// Agent is an agents directory entry added at run time.
type Agent struct {
	Name      string    `json:"name"`
	Addresses []string  `json:"addresses"`
	AddedAt   time.Time `json:"addedAt"`
}

func checkID(field, id string) error {
	switch {
	case id == "":
		return &InvalidError{Field: field, Reason: "empty"}
	case len(id) > MaxIDBytes:
		return &InvalidError{Field: field, Reason: fmt.Sprintf("%d bytes, at most %d", len(id), MaxIDBytes)}
	case !utf8.ValidString(id):
		return &InvalidError{Field: field, Reason: "not valid UTF-8"}
	}
	return nil
}

// bound cuts s to at most MaxTextBytes at a UTF-8 boundary and reports
// whether it cut.
func bound(s string) (string, bool) {
	if len(s) <= MaxTextBytes {
		return s, false
	}
	cut := MaxTextBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// ---- generic record access ----

// getRecord decodes the record under key of bucket; keyOf returns the key
// the record names, which must equal key.
func getRecord[T any](tx *bolt.Tx, bucket []byte, key string, keyOf func(*T) string) (T, bool, error) {
	var rec T
	raw := tx.Bucket(bucket).Get([]byte(key))
	if raw == nil {
		return rec, false, nil
	}
	rec, err := decodeRecord(bucket, []byte(key), raw, keyOf)
	return rec, err == nil, err
}

func decodeRecord[T any](bucket, key, raw []byte, keyOf func(*T) string) (T, error) {
	var rec T
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, &CorruptError{Bucket: string(bucket), Key: string(key), Err: err}
	}
	if got := keyOf(&rec); got != string(key) {
		return rec, &CorruptError{Bucket: string(bucket), Key: string(key), Err: fmt.Errorf("record names %q", got)}
	}
	return rec, nil
}

func putRecord(tx *bolt.Tx, bucket []byte, key string, rec any) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("serverstore: encode %s/%q: %w", bucket, key, err)
	}
	return tx.Bucket(bucket).Put([]byte(key), raw)
}

// listRecords returns every record of bucket in key order.
func listRecords[T any](tx *bolt.Tx, bucket []byte, keyOf func(*T) string) ([]T, error) {
	out := []T{}
	err := tx.Bucket(bucket).ForEach(func(k, v []byte) error {
		rec, err := decodeRecord(bucket, k, v, keyOf)
		if err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// deleteRecord removes key from bucket and reports whether it existed.
func deleteRecord(tx *bolt.Tx, bucket []byte, key string) (bool, error) {
	b := tx.Bucket(bucket)
	existed := b.Get([]byte(key)) != nil
	return existed, b.Delete([]byte(key))
}

func taskKey(t *Task) string         { return t.TaskID }
func instanceKey(i *Instance) string { return i.InstanceID }
func agentKey(a *Agent) string       { return a.Name }

// ---- tasks ----

// Task returns the task with id; ok is false when there is none.
func (t *Tx) Task(id string) (task Task, ok bool, err error) {
	if err := checkID("taskId", id); err != nil {
		return Task{}, false, err
	}
	return getRecord(t.tx, bucketTasks, id, taskKey)
}

// PutTask stores task, replacing the record with its id, and returns what
// was stored: CreatedAt is kept from the earlier record (or stamped now)
// when task's is zero, UpdatedAt is stamped now, and the prompt and
// feedback texts are bounded to MaxTextBytes.
func (t *Tx) PutTask(task Task) (Task, error) {
	if err := checkID("taskId", task.TaskID); err != nil {
		return Task{}, err
	}
	if err := checkID("instanceId", task.InstanceID); err != nil {
		return Task{}, err
	}
	if task.State == "" {
		return Task{}, &InvalidError{Field: "state", Reason: "empty"}
	}
	if task.Rejects < 0 || task.MaxRejects < 0 {
		return Task{}, &InvalidError{Field: "rejects", Reason: fmt.Sprintf("rejects %d and maxRejects %d must not be negative", task.Rejects, task.MaxRejects)}
	}
	var cut bool
	task.Prompt, cut = bound(task.Prompt)
	task.PromptTruncated = task.PromptTruncated || cut
	task.Feedback = append([]Feedback(nil), task.Feedback...)
	for i := range task.Feedback {
		task.Feedback[i].Text, cut = bound(task.Feedback[i].Text)
		task.Feedback[i].Truncated = task.Feedback[i].Truncated || cut
	}
	now := t.s.stamp()
	if task.CreatedAt.IsZero() {
		task.CreatedAt = now
		if old, ok, err := getRecord(t.tx, bucketTasks, task.TaskID, taskKey); err == nil && ok {
			task.CreatedAt = old.CreatedAt
		}
	}
	task.UpdatedAt = now
	if err := putRecord(t.tx, bucketTasks, task.TaskID, task); err != nil {
		return Task{}, err
	}
	return task, nil
}

// Tasks returns every task, sorted by id.
func (t *Tx) Tasks() ([]Task, error) { return listRecords(t.tx, bucketTasks, taskKey) }

// DeleteTask removes the task with id and reports whether it existed.
func (t *Tx) DeleteTask(id string) (bool, error) {
	if err := checkID("taskId", id); err != nil {
		return false, err
	}
	return deleteRecord(t.tx, bucketTasks, id)
}

// ---- instances ----

// Instance returns the instance with id; ok is false when there is none.
func (t *Tx) Instance(id string) (Instance, bool, error) {
	if err := checkID("instanceId", id); err != nil {
		return Instance{}, false, err
	}
	return getRecord(t.tx, bucketInstances, id, instanceKey)
}

// PutInstance stores in, replacing the record with its id, and returns
// what was stored (CreatedAt kept or stamped as for PutTask, UpdatedAt
// stamped now).
func (t *Tx) PutInstance(in Instance) (Instance, error) {
	if err := checkID("instanceId", in.InstanceID); err != nil {
		return Instance{}, err
	}
	if err := checkID("machine", in.Machine); err != nil {
		return Instance{}, err
	}
	if in.State == "" {
		return Instance{}, &InvalidError{Field: "state", Reason: "empty"}
	}
	now := t.s.stamp()
	if in.CreatedAt.IsZero() {
		in.CreatedAt = now
		if old, ok, err := getRecord(t.tx, bucketInstances, in.InstanceID, instanceKey); err == nil && ok {
			in.CreatedAt = old.CreatedAt
		}
	}
	in.UpdatedAt = now
	if err := putRecord(t.tx, bucketInstances, in.InstanceID, in); err != nil {
		return Instance{}, err
	}
	return in, nil
}

// Instances returns every instance, sorted by id.
func (t *Tx) Instances() ([]Instance, error) {
	return listRecords(t.tx, bucketInstances, instanceKey)
}

// DeleteInstance removes the instance with id and reports whether it
// existed.
func (t *Tx) DeleteInstance(id string) (bool, error) {
	if err := checkID("instanceId", id); err != nil {
		return false, err
	}
	return deleteRecord(t.tx, bucketInstances, id)
}

// ---- session projections ----

// Projection returns a copy of the session projection stored for machine
// (the session package's Projection, as JSON); ok is false when there is
// none.
func (t *Tx) Projection(machine string) ([]byte, bool, error) {
	if err := checkID("machine", machine); err != nil {
		return nil, false, err
	}
	v := t.tx.Bucket(bucketProjections).Get([]byte(machine))
	if v == nil {
		return nil, false, nil
	}
	return append([]byte(nil), v...), true, nil // v is only valid inside the transaction
}

// PutProjection stores the session projection of machine, replacing the
// earlier one. It must be a JSON document; the store does not look inside.
func (t *Tx) PutProjection(machine string, projection []byte) error {
	if err := checkID("machine", machine); err != nil {
		return err
	}
	if !json.Valid(projection) {
		return &InvalidError{Field: "projection", Reason: "not a JSON document"}
	}
	return t.tx.Bucket(bucketProjections).Put([]byte(machine), projection)
}

// DeleteProjection removes the projection of machine and reports whether
// there was one.
func (t *Tx) DeleteProjection(machine string) (bool, error) {
	if err := checkID("machine", machine); err != nil {
		return false, err
	}
	return deleteRecord(t.tx, bucketProjections, machine)
}

// ---- agents directory ----

// Agent returns the agents directory entry name; ok is false when there
// is none.
func (t *Tx) Agent(name string) (Agent, bool, error) {
	if err := checkID("agent name", name); err != nil {
		return Agent{}, false, err
	}
	return getRecord(t.tx, bucketAgents, name, agentKey)
}

// PutAgent stores a, replacing the entry with its name; AddedAt is
// stamped now when zero. It returns what was stored.
func (t *Tx) PutAgent(a Agent) (Agent, error) {
	if err := checkID("agent name", a.Name); err != nil {
		return Agent{}, err
	}
	if len(a.Addresses) == 0 || len(a.Addresses) > MaxAgentAddresses {
		return Agent{}, &InvalidError{Field: "addresses", Reason: fmt.Sprintf("%d, want 1 to %d", len(a.Addresses), MaxAgentAddresses)}
	}
	for i, addr := range a.Addresses {
		if err := checkID(fmt.Sprintf("addresses[%d]", i), addr); err != nil {
			return Agent{}, err
		}
	}
	a.Addresses = append([]string(nil), a.Addresses...)
	if a.AddedAt.IsZero() {
		a.AddedAt = t.s.stamp()
	}
	if err := putRecord(t.tx, bucketAgents, a.Name, a); err != nil {
		return Agent{}, err
	}
	return a, nil
}

// Agents returns every agents directory entry, sorted by name.
func (t *Tx) Agents() ([]Agent, error) { return listRecords(t.tx, bucketAgents, agentKey) }

// DeleteAgent removes the entry name and reports whether it existed.
func (t *Tx) DeleteAgent(name string) (bool, error) {
	if err := checkID("agent name", name); err != nil {
		return false, err
	}
	return deleteRecord(t.tx, bucketAgents, name)
}

// ---- one-transaction shorthands ----

// GetTask returns the task with id (ErrNotFound when there is none).
func (s *Store) GetTask(id string) (task Task, err error) {
	return viewOne(s, func(tx *Tx) (Task, bool, error) { return tx.Task(id) }, "task", id)
}

// PutTask stores task in its own transaction (see Tx.PutTask).
func (s *Store) PutTask(task Task) (stored Task, err error) {
	err = s.Update(func(tx *Tx) error { stored, err = tx.PutTask(task); return err })
	return stored, err
}

// ListTasks returns every task, sorted by id.
func (s *Store) ListTasks() (tasks []Task, err error) {
	err = s.View(func(tx *Tx) error { tasks, err = tx.Tasks(); return err })
	return tasks, err
}

// DeleteTask removes the task with id and reports whether it existed.
func (s *Store) DeleteTask(id string) (existed bool, err error) {
	err = s.Update(func(tx *Tx) error { existed, err = tx.DeleteTask(id); return err })
	return existed, err
}

// GetInstance returns the instance with id (ErrNotFound when there is
// none).
func (s *Store) GetInstance(id string) (Instance, error) {
	return viewOne(s, func(tx *Tx) (Instance, bool, error) { return tx.Instance(id) }, "instance", id)
}

// PutInstance stores in in its own transaction (see Tx.PutInstance).
func (s *Store) PutInstance(in Instance) (stored Instance, err error) {
	err = s.Update(func(tx *Tx) error { stored, err = tx.PutInstance(in); return err })
	return stored, err
}

// ListInstances returns every instance, sorted by id.
func (s *Store) ListInstances() (ins []Instance, err error) {
	err = s.View(func(tx *Tx) error { ins, err = tx.Instances(); return err })
	return ins, err
}

// DeleteInstance removes the instance with id and reports whether it
// existed.
func (s *Store) DeleteInstance(id string) (existed bool, err error) {
	err = s.Update(func(tx *Tx) error { existed, err = tx.DeleteInstance(id); return err })
	return existed, err
}

// GetProjection returns the session projection of machine (ErrNotFound
// when there is none).
func (s *Store) GetProjection(machine string) ([]byte, error) {
	return viewOne(s, func(tx *Tx) ([]byte, bool, error) { return tx.Projection(machine) }, "projection", machine)
}

// PutProjection stores the session projection of machine in its own
// transaction.
func (s *Store) PutProjection(machine string, projection []byte) error {
	return s.Update(func(tx *Tx) error { return tx.PutProjection(machine, projection) })
}

// ListAgents returns every agents directory entry, sorted by name.
func (s *Store) ListAgents() (agents []Agent, err error) {
	err = s.View(func(tx *Tx) error { agents, err = tx.Agents(); return err })
	return agents, err
}

// PutAgent stores an agents directory entry in its own transaction.
func (s *Store) PutAgent(a Agent) (stored Agent, err error) {
	err = s.Update(func(tx *Tx) error { stored, err = tx.PutAgent(a); return err })
	return stored, err
}

// DeleteAgent removes the agents directory entry name and reports whether
// it existed.
func (s *Store) DeleteAgent(name string) (existed bool, err error) {
	err = s.Update(func(tx *Tx) error { existed, err = tx.DeleteAgent(name); return err })
	return existed, err
}

// viewOne runs get in a read transaction and turns "absent" into an
// ErrNotFound naming what was looked for.
func viewOne[T any](s *Store, get func(*Tx) (T, bool, error), what, id string) (T, error) {
	var rec T
	var ok bool
	err := s.View(func(tx *Tx) (err error) { rec, ok, err = get(tx); return err })
	if err == nil && !ok {
		err = fmt.Errorf("%w: %s %q", ErrNotFound, what, id)
	}
	return rec, err
}

// ---- copies ----

// Clone returns a copy of task that shares no memory with it, for a
// change queued while the original may still change.
func (task Task) Clone() Task {
	task.Feedback = append([]Feedback(nil), task.Feedback...)
	if task.LastDone != nil {
		done := task.LastDone.Clone()
		task.LastDone = &done
	}
	task.Delivery = ptrCopy(task.Delivery)
	return task
}

// Clone returns a copy of td that shares no memory with it.
func (td TaskDone) Clone() TaskDone {
	if s := td.Stats; s != nil {
		td.Stats = &TaskStats{Turns: ptrCopy(s.Turns), ToolCalls: ptrCopy(s.ToolCalls), FilesChanged: ptrCopy(s.FilesChanged), Cost: ptrCopy(s.Cost)}
	}
	td.Worktree = ptrCopy(td.Worktree)
	return td
}

// Clone returns a copy of in that shares no memory with it.
func (in Instance) Clone() Instance {
	in.Model = ptrCopy(in.Model)
	in.Worktree = ptrCopy(in.Worktree)
	return in
}

func ptrCopy[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
