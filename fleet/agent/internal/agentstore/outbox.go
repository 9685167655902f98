package agentstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/transport"
)

// Seq identifies one task_done report of this agent: strictly increasing
// for the life of the state file, never reused.
type Seq uint64

// MaxSeq is the largest seq: every integer up to 2^53 is exactly a float64,
// which is how JSON (and the TypeScript server) carries it.
const MaxSeq Seq = 1 << 53

// Float returns the seq as the wire's number.
func (q Seq) Float() float64 { return float64(q) }

// SeqOf turns a wire number into a Seq; false when it is not an integer
// in [1, MaxSeq] and so cannot be a seq this store assigned.
func SeqOf(f float64) (Seq, bool) {
	if f < 1 || f > float64(MaxSeq) || f != math.Trunc(f) {
		return 0, false
	}
	return Seq(f), true
}

func (q Seq) key() []byte { return binary.BigEndian.AppendUint64(nil, uint64(q)) }

// Entry is one task_done waiting for its acknowledgement.
type Entry struct {
	// Seq is the entry's seq, also in Frame.Seq.
	Seq Seq
	// Frame is the report exactly as it is (re)sent.
	Frame *transport.TaskDoneFrame
	// Owner names the connection that submitted the task (advisory: see
	// PreferOwner).
	Owner string
	// Attempts counts the sends recorded with MarkSent.
	Attempts int
	// CreatedAt is when Put stored the entry.
	CreatedAt time.Time
	// LastAttemptAt is the time of the last MarkSent (zero before).
	LastAttemptAt time.Time
	// NextAttemptAt is when the entry is due again: CreatedAt until the
	// first send, then after the retry policy's delay.
	NextAttemptAt time.Time
}

// PreferOwner reports whether this send should go to the owner connection
// alone (when it is still open): only the first attempt is owner-aware, as
// in the reference; every later one goes to every open connection.
func (e Entry) PreferOwner() bool { return e.Owner != "" && e.Attempts == 0 }

// outboxRecord is an entry as stored. The frame is kept in its wire form,
// so that a replay sends exactly the bytes that were persisted.
type outboxRecord struct {
	TaskID        string          `json:"taskId"`
	Frame         json.RawMessage `json:"frame"`
	Owner         string          `json:"owner,omitzero"`
	Attempts      int             `json:"attempts,omitzero"`
	CreatedAt     time.Time       `json:"createdAt"`
	LastAttemptAt time.Time       `json:"lastAttemptAt,omitzero"`
	NextAttemptAt time.Time       `json:"nextAttemptAt"`
}

var taskStatuses = map[transport.TaskStatus]bool{
	transport.TaskSettled: true, transport.TaskBudgetExceeded: true, transport.TaskAborted: true,
}

// Put stores frame as a new outbox entry and returns it with its seq
// assigned (frame.Seq is ignored, and frame itself is not modified). The
// frame must encode within transport.MaxFrameBytes: cap
// lastAssistantMessage before calling. The entry is committed to disk
// before Put returns: send only after that. owner names the connection
// that submitted the task ("" if none).
//
// In the same transaction, if the registry holds frame's instance with
// frame's task open (Instance.TaskID), that task is closed, so that a
// crash can never leave a task both reported and still open (a restarted
// agent would report it again as aborted).
func (s *Store) Put(frame *transport.TaskDoneFrame, owner string) (Entry, error) {
	if err := checkTaskDone(frame); err != nil {
		return Entry{}, err
	}
	now := s.now()
	var e Entry
	err := s.db.Update(func(tx *bolt.Tx) error {
		meta, out := tx.Bucket(bucketMeta), tx.Bucket(bucketOutbox)
		seq, err := nextSeq(meta, now)
		if err != nil {
			return err
		}
		f := *frame
		f.Seq = seq.Float()
		wire, err := transport.MarshalFrame(&f)
		if err != nil {
			return &InvalidError{Field: "frame", Reason: err.Error()}
		}
		wire = bytes.TrimSuffix(wire, []byte{'\n'})
		// What cannot be read back could never be replayed: refuse it now.
		if _, err := transport.ParseFrame(wire); err != nil {
			return &InvalidError{Field: "frame", Reason: err.Error()}
		}
		rec := outboxRecord{TaskID: f.TaskID, Frame: wire, Owner: owner, CreatedAt: now, NextAttemptAt: now}
		val, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := out.Put(seq.key(), val); err != nil {
			return err
		}
		if err := meta.Put(keyLastSeq, seq.key()); err != nil {
			return err
		}
		if err := closeOpenTask(tx, f.InstanceID, f.TaskID, now); err != nil {
			return err
		}
		e = Entry{Seq: seq, Frame: &f, Owner: owner, CreatedAt: now, NextAttemptAt: now}
		return nil
	})
	if err != nil {
		return Entry{}, fmt.Errorf("agentstore: put task_done %s: %w", frame.TaskID, err)
	}
	return e, nil
}

func checkTaskDone(f *transport.TaskDoneFrame) error {
	switch {
	case f == nil:
		return &InvalidError{Field: "frame", Reason: "nil"}
	case f.TaskID == "":
		return &InvalidError{Field: "taskId", Reason: "empty"}
	case f.InstanceID == "":
		return &InvalidError{Field: "instanceId", Reason: "empty"}
	case !taskStatuses[f.Status]:
		return &InvalidError{Field: "status", Reason: strconv.Quote(string(f.Status)) + " is not settled, budget_exceeded or aborted"}
	}
	return nil
}

// nextSeq returns max(last seq + 1, now in ms), which stays above every
// seq ever assigned in this file whatever the clock does.
func nextSeq(meta *bolt.Bucket, now time.Time) (Seq, error) {
	var last Seq
	if v := meta.Get(keyLastSeq); len(v) == 8 {
		last = Seq(binary.BigEndian.Uint64(v))
	}
	seq := last + 1
	if ms := now.UnixMilli(); ms > 0 && Seq(ms) > seq {
		seq = Seq(ms)
	}
	if seq > MaxSeq {
		return 0, ErrSeqExhausted
	}
	return seq, nil
}

// Ack removes the entry (taskID, seq), reporting whether it was there. An
// entry already gone, a seq this store never assigned, or a seq whose
// entry belongs to another task are all answered false, nil: acks are
// idempotent.
func (s *Store) Ack(taskID string, seq float64) (bool, error) {
	q, ok := SeqOf(seq)
	if !ok {
		return false, nil
	}
	removed := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		out := tx.Bucket(bucketOutbox)
		v := out.Get(q.key())
		if v == nil {
			return nil
		}
		var rec outboxRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return &CorruptError{Bucket: string(bucketOutbox), Key: strconv.FormatUint(uint64(q), 10), Err: err}
		}
		if rec.TaskID != taskID {
			s.log.Warn().Str("taskId", taskID).Uint64("seq", uint64(q)).Str("storedTaskId", rec.TaskID).
				Msg("task_done_ack names another task for this seq; entry kept")
			return nil
		}
		removed = true
		return out.Delete(q.key())
	})
	if err != nil {
		return false, fmt.Errorf("agentstore: ack %s/%d: %w", taskID, q, err)
	}
	return removed, nil
}

// Pending returns every unacknowledged entry in seq order: what a new
// connection gets replayed. A record that cannot be decoded is logged and
// skipped (it stays in the file for inspection).
func (s *Store) Pending() ([]Entry, error) {
	return s.entries(func(Entry) bool { return true })
}

// Due returns the entries whose next attempt is due at the store clock's
// now, in seq order: never-sent entries and those whose retry delay has
// passed.
func (s *Store) Due() ([]Entry, error) {
	now := s.now()
	return s.entries(func(e Entry) bool { return !e.NextAttemptAt.After(now) })
}

// NextDue returns the earliest NextAttemptAt of all entries, for arming a
// retry timer; false when the outbox is empty.
func (s *Store) NextDue() (time.Time, bool, error) {
	all, err := s.Pending()
	if err != nil || len(all) == 0 {
		return time.Time{}, false, err
	}
	next := all[0].NextAttemptAt
	for _, e := range all[1:] {
		if e.NextAttemptAt.Before(next) {
			next = e.NextAttemptAt
		}
	}
	return next, true, nil
}

// MarkSent records one delivery attempt of each given entry (all in one
// transaction): Attempts+1, LastAttemptAt = now, and NextAttemptAt = now +
// RetryPolicy.ForAttempt(attempts before this one). Entries already acked
// are ignored.
func (s *Store) MarkSent(seqs ...Seq) error {
	now := s.now()
	err := s.db.Update(func(tx *bolt.Tx) error {
		out := tx.Bucket(bucketOutbox)
		for _, q := range seqs {
			v := out.Get(q.key())
			if v == nil {
				continue
			}
			var rec outboxRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return &CorruptError{Bucket: string(bucketOutbox), Key: strconv.FormatUint(uint64(q), 10), Err: err}
			}
			rec.NextAttemptAt = now.Add(s.policy.ForAttempt(float64(rec.Attempts)))
			rec.Attempts++
			rec.LastAttemptAt = now
			val, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			if err := out.Put(q.key(), val); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("agentstore: mark sent: %w", err)
	}
	return nil
}

// entries reads the outbox in seq order, keeping the entries keep accepts.
func (s *Store) entries(keep func(Entry) bool) ([]Entry, error) {
	var list []Entry
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(k, v []byte) error {
			e, err := decodeEntry(k, v)
			if err != nil {
				s.log.Error().Err(err).Msg("outbox entry skipped")
				return nil
			}
			if keep(e) {
				list = append(list, e)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("agentstore: read outbox: %w", err)
	}
	return list, nil
}

func decodeEntry(k, v []byte) (Entry, error) {
	corrupt := func(err error) (Entry, error) {
		return Entry{}, &CorruptError{Bucket: string(bucketOutbox), Key: fmt.Sprintf("%x", k), Err: err}
	}
	if len(k) != 8 {
		return corrupt(fmt.Errorf("key of %d bytes, want 8", len(k)))
	}
	q := Seq(binary.BigEndian.Uint64(k))
	var rec outboxRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return corrupt(err)
	}
	f, err := transport.ParseFrame(rec.Frame)
	if err != nil {
		return corrupt(err)
	}
	td, ok := f.(*transport.TaskDoneFrame)
	if !ok || td.Seq != q.Float() || td.TaskID != rec.TaskID {
		return corrupt(fmt.Errorf("stored frame is not task_done %s seq %d", rec.TaskID, q))
	}
	return Entry{
		Seq: q, Frame: td, Owner: rec.Owner, Attempts: rec.Attempts,
		CreatedAt: rec.CreatedAt, LastAttemptAt: rec.LastAttemptAt, NextAttemptAt: rec.NextAttemptAt,
	}, nil
}
