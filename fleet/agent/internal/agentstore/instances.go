package agentstore

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/transport"
)

// Instance is what the agent persists about one worker: enough to answer
// list, to re-attach to the worker's shim after an agent restart, or to
// report the worker lost with its session path and its open task aborted.
type Instance struct {
	InstanceID string `json:"instanceId"`
	Cwd        string `json:"cwd"`
	Bundle     string `json:"bundle,omitzero"`
	BundleHash string `json:"bundleHash,omitzero"`
	Model      *Model `json:"model,omitzero"`
	// ModelPinned is set while the worker's model is pinned (the bundle's
	// model.pin, or model_pin), so that a re-adopted worker stays pinned.
	ModelPinned bool                    `json:"modelPinned,omitzero"`
	SessionPath string                  `json:"sessionPath,omitzero"`
	State       transport.InstanceState `json:"state"`
	// Spawning is set from before the worker's start until its spawn is
	// complete: a restarted agent that finds it set stops the worker (a
	// spawn nobody was told of is rolled back, never left running).
	Spawning bool `json:"spawning,omitzero"`

	// TaskID is the open task (one per instance; a newer one replaces
	// it). Put of the task's task_done clears it in the same transaction.
	TaskID string `json:"taskId,omitzero"`
	// TaskOwner names the connection that submitted TaskID (advisory).
	TaskOwner string `json:"taskOwner,omitzero"`
	// Rejection is the id of the last rejection (task_reject) carried
	// out, stored with the revision's TaskID before its prompt reaches
	// the worker: a restarted server may send a rejection again, and a
	// restarted agent must still know it carried that one out.
	Rejection string `json:"rejection,omitzero"`
	// Revision is the prompt that carries Rejection out, kept until the
	// worker's shim has taken it: a restarted agent that finds it here
	// sends it, unless the worker's session shows it arrived.
	Revision string `json:"revision,omitzero"`
	// TraceID follows the operation that started the instance.
	TraceID string `json:"traceId,omitzero"`
	// SpawnID is the id of the spawn request that started the worker: a
	// server that never stored the spawn's answer knows the worker by it.
	SpawnID string `json:"spawnId,omitzero"`

	// Shim locates the shim process that holds the worker's stdio, for
	// re-adoption by a restarted agent; nil when there is none.
	Shim *Shim `json:"shim,omitzero"`
	// Budget is the instance's spending limit and what it spent so far.
	Budget Budget `json:"budget,omitzero"`

	// CreatedAt is set by PutInstance when zero; UpdatedAt on every write.
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Model is the model a worker runs.
type Model struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	Thinking string `json:"thinking,omitzero"`
}

// Shim is how a restarted agent finds and authenticates to a worker's
// shim. The token is a per-instance secret: the state file is mode 0600.
type Shim struct {
	Socket string `json:"socket"`
	Token  string `json:"token"`
	// ShimPID, WorkerPID and PGID are what the shim reported at start;
	// informational only — never signal them without asking the shim
	// first, the pids may have been reused.
	ShimPID   int       `json:"shimPid,omitzero"`
	WorkerPID int       `json:"workerPid,omitzero"`
	PGID      int       `json:"pgid,omitzero"`
	StartedAt time.Time `json:"startedAt,omitzero"`
}

// Budget is an instance's spending limit (reference 1.12).
type Budget struct {
	// MaxCost is the limit from spawn.budget.maxCost; nil means none.
	MaxCost *float64 `json:"maxCost,omitzero"`
	// Spent is the running total of message.usage.cost.total.
	Spent float64 `json:"spent,omitzero"`
	// Exceeded is set once Spent passed MaxCost; it stays set.
	Exceeded bool `json:"exceeded,omitzero"`
}

// PutInstance creates or replaces the record of inst.InstanceID. A zero
// CreatedAt is set to now; UpdatedAt is always set to now. It returns the
// record as stored.
func (s *Store) PutInstance(inst Instance) (Instance, error) {
	if inst.InstanceID == "" {
		return Instance{}, &InvalidError{Field: "instanceId", Reason: "empty"}
	}
	now := s.now()
	if inst.CreatedAt.IsZero() {
		inst.CreatedAt = now
	}
	inst.UpdatedAt = now
	err := s.db.Update(func(tx *bolt.Tx) error { return putInstance(tx, inst) })
	if err != nil {
		return Instance{}, fmt.Errorf("agentstore: put instance %s: %w", inst.InstanceID, err)
	}
	return inst, nil
}

// Instance returns the record of id, or an error matching ErrNotFound.
func (s *Store) Instance(id string) (Instance, error) {
	var inst Instance
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		inst, err = getInstance(tx, id)
		return err
	})
	if err != nil {
		return Instance{}, fmt.Errorf("agentstore: instance %s: %w", id, err)
	}
	return inst, nil
}

// Instances returns every record, oldest first (CreatedAt, then id). A
// record that cannot be decoded is logged and skipped.
func (s *Store) Instances() ([]Instance, error) {
	var list []Instance
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketInstances).ForEach(func(k, v []byte) error {
			var inst Instance
			if err := json.Unmarshal(v, &inst); err != nil {
				s.log.Error().Err(&CorruptError{Bucket: string(bucketInstances), Key: string(k), Err: err}).Msg("instance record skipped")
				return nil
			}
			list = append(list, inst)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("agentstore: read instances: %w", err)
	}
	slices.SortFunc(list, func(a, b Instance) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.InstanceID, b.InstanceID))
	})
	return list, nil
}

// UpdateInstance applies fn to the record of id and stores the result, in
// one transaction (UpdatedAt set to now). When fn returns an error nothing
// is written and that error is returned. A missing record matches
// ErrNotFound; fn may not change InstanceID.
func (s *Store) UpdateInstance(id string, fn func(*Instance) error) (Instance, error) {
	var inst Instance
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		if inst, err = getInstance(tx, id); err != nil {
			return err
		}
		if err := fn(&inst); err != nil {
			return err
		}
		if inst.InstanceID != id {
			return &InvalidError{Field: "instanceId", Reason: fmt.Sprintf("update may not rename %q to %q", id, inst.InstanceID)}
		}
		inst.UpdatedAt = s.now()
		return putInstance(tx, inst)
	})
	if err != nil {
		return Instance{}, fmt.Errorf("agentstore: update instance %s: %w", id, err)
	}
	return inst, nil
}

// DeleteInstance removes the record of id; a missing record is fine.
func (s *Store) DeleteInstance(id string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketInstances).Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("agentstore: delete instance %s: %w", id, err)
	}
	return nil
}

func putInstance(tx *bolt.Tx, inst Instance) error {
	val, err := json.Marshal(inst)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketInstances).Put([]byte(inst.InstanceID), val)
}

func getInstance(tx *bolt.Tx, id string) (Instance, error) {
	v := tx.Bucket(bucketInstances).Get([]byte(id))
	if v == nil {
		return Instance{}, ErrNotFound
	}
	var inst Instance
	if err := json.Unmarshal(v, &inst); err != nil {
		return Instance{}, &CorruptError{Bucket: string(bucketInstances), Key: id, Err: err}
	}
	return inst, nil
}

// closeOpenTask clears the open task of instanceID when it is taskID (part
// of Put's transaction). No record, or another open task, is left alone.
func closeOpenTask(tx *bolt.Tx, instanceID, taskID string, now time.Time) error {
	inst, err := getInstance(tx, instanceID)
	if err != nil || inst.TaskID != taskID {
		return nil // a corrupt record must not block the report
	}
	inst.TaskID, inst.TaskOwner, inst.UpdatedAt = "", "", now
	return putInstance(tx, inst)
}
