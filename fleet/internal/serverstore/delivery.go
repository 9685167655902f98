package serverstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DedupeKey identifies one task_done report: the agent sends each report
// with a fresh seq and replays it, same seq, until it sees the ack.
type DedupeKey struct {
	InstanceID string
	TaskID     string
	Seq        float64
}

// String renders the key as "<instanceId>:<taskId>:<seq>", the form the
// TypeScript server uses, for logs. It is not the stored form: ids may
// contain ':', so the store keeps the parts length-prefixed.
func (k DedupeKey) String() string {
	return k.InstanceID + ":" + k.TaskID + ":" + strconv.FormatFloat(k.Seq+0, 'f', -1, 64) // +0 turns -0 into 0
}

func (k DedupeKey) check() error {
	if err := checkID("instanceId", k.InstanceID); err != nil {
		return err
	}
	if err := checkID("taskId", k.TaskID); err != nil {
		return err
	}
	if math.IsNaN(k.Seq) || math.IsInf(k.Seq, 0) {
		return &InvalidError{Field: "seq", Reason: fmt.Sprintf("%v is not a finite number", k.Seq)}
	}
	return nil
}

// encode returns the stored form: uvarint length + instance id, uvarint
// length + task id, 8 bytes of seq (IEEE 754, big endian, -0 as 0).
func (k DedupeKey) encode() []byte {
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(k.InstanceID)+len(k.TaskID)+8)
	b = binary.AppendUvarint(b, uint64(len(k.InstanceID)))
	b = append(b, k.InstanceID...)
	b = binary.AppendUvarint(b, uint64(len(k.TaskID)))
	b = append(b, k.TaskID...)
	seq := k.Seq
	if seq == 0 {
		seq = 0 // -0 and 0 are the same seq
	}
	return binary.BigEndian.AppendUint64(b, math.Float64bits(seq))
}

// errBadKey is wrapped by decodeKey's errors.
var errBadKey = errors.New("malformed dedupe key")

// decodeKey parses the stored form. It accepts only what encode produces
// for a valid key, so that every key has exactly one stored form.
func decodeKey(b []byte) (DedupeKey, error) {
	rest := b
	part := func(name string) (string, error) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return "", fmt.Errorf("%w: bad %s length", errBadKey, name)
		}
		s := string(rest[w : w+int(n)])
		rest = rest[w+int(n):]
		return s, nil
	}
	inst, err := part("instanceId")
	if err != nil {
		return DedupeKey{}, err
	}
	task, err := part("taskId")
	if err != nil {
		return DedupeKey{}, err
	}
	if len(rest) != 8 {
		return DedupeKey{}, fmt.Errorf("%w: %d bytes of seq, want 8", errBadKey, len(rest))
	}
	k := DedupeKey{InstanceID: inst, TaskID: task, Seq: math.Float64frombits(binary.BigEndian.Uint64(rest))}
	if err := k.check(); err != nil {
		return DedupeKey{}, fmt.Errorf("%w: %w", errBadKey, err)
	}
	if !bytes.Equal(k.encode(), b) {
		return DedupeKey{}, fmt.Errorf("%w: not in canonical form", errBadKey)
	}
	return k, nil
}

// Delivery is the store's record of one task_done report.
type Delivery struct {
	Key DedupeKey `json:"-"`
	// Order is the receipt order (1, 2, 3, …) across the file's life.
	Order      uint64    `json:"order"`
	ReceivedAt time.Time `json:"receivedAt"`
	// Notified is set by MarkNotified; from then on the report is never
	// handed to the application again.
	Notified   bool      `json:"notified"`
	NotifiedAt time.Time `json:"notifiedAt,omitzero"`
	// TaskDone is the report. It is kept while the notification is
	// pending and dropped once it is done (the task record keeps the
	// latest one as LastDone); a notified Delivery is only a dedupe key.
	TaskDone *TaskDone `json:"taskDone,omitempty"`
}

// Receipt says what RecordTaskDone did with a task_done.
type Receipt struct {
	Key DedupeKey
	// Duplicate is true when the key was already recorded: nothing was
	// written and the application must not be notified (again). Ack it.
	Duplicate bool
	// Notified, for a duplicate, says whether the earlier report's
	// notification is done; when false it is still pending (in progress,
	// or to be replayed by PendingNotifications after a restart).
	Notified bool
	// Order is the receipt order of the recorded report.
	Order uint64
}

// RecordTaskDone is the first step of delivering a task_done (see the
// package documentation). In one transaction it checks the report's
// dedupe key and, when it is new, records the report as pending
// notification, sets it as LastDone of its task when the store has that
// task for that instance, and runs onFirst (which may be nil) with the
// same transaction, so that the review state can change together with the
// receipt. If onFirst fails nothing is written and its error is returned;
// do not ack then.
//
// After it returned without error the report is durable: ack it to the
// agent. For a new report (Duplicate false) notify the application, then
// call MarkNotified. A duplicate is acked and nothing else.
func (s *Store) RecordTaskDone(td TaskDone, onFirst func(*Tx) error) (Receipt, error) {
	if err := checkTaskDone(td); err != nil {
		return Receipt{}, err
	}
	// Most duplicates are found by a read, which costs no fsync.
	var rc Receipt
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		rc, err = lookupReceipt(tx, td.Key(), td.Key().encode())
		return err
	})
	if err != nil || rc.Duplicate {
		return rc, err
	}
	rcp, p := s.QueueTaskDone(td, onFirst, nil)
	if err := p.Wait(); err != nil {
		return Receipt{}, err
	}
	return *rcp, nil
}

// QueueTaskDone is RecordTaskDone queued (see Queue), without the read
// that finds most duplicates first: the receipt it returns is filled in
// once the Pending is done without error.
func (s *Store) QueueTaskDone(td TaskDone, onFirst func(*Tx) error, then func(error)) (*Receipt, *Pending) {
	rc := new(Receipt)
	if err := checkTaskDone(td); err != nil {
		p := &Pending{s: s, then: then, done: make(chan struct{})}
		p.finish(err)
		return rc, p
	}
	key := td.Key()
	p := s.Queue(func(t *Tx) error {
		var err error
		*rc, err = t.recordTaskDone(td, onFirst)
		if err != nil {
			return fmt.Errorf("serverstore: record task_done %s: %w", key, err)
		}
		return nil
	}, func(err error) {
		if err == nil {
			s.log.Debug().Str("key", key.String()).Uint64("order", rc.Order).Bool("duplicate", rc.Duplicate).Msg("task_done recorded")
		}
		if then != nil {
			then(err)
		}
	})
	return rc, p
}

func checkTaskDone(td TaskDone) error {
	if err := td.Key().check(); err != nil {
		return err
	}
	if td.Status == "" {
		return &InvalidError{Field: "status", Reason: "empty"}
	}
	return nil
}

// recordTaskDone is RecordTaskDone's transaction.
func (t *Tx) recordTaskDone(td TaskDone, onFirst func(*Tx) error) (Receipt, error) {
	key := td.Key()
	ek := key.encode()
	rc, err := lookupReceipt(t.tx, key, ek)
	if err != nil || rc.Duplicate {
		return rc, err
	}
	deliveries := t.tx.Bucket(bucketDeliveries)
	order, err := deliveries.NextSequence()
	if err != nil {
		return Receipt{}, err
	}
	done := td
	d := Delivery{Key: key, Order: order, ReceivedAt: t.s.stamp(), TaskDone: &done}
	if err := putDelivery(t.tx, ek, d); err != nil {
		return Receipt{}, err
	}
	if err := t.tx.Bucket(bucketPendingIdx).Put(orderKey(order), ek); err != nil {
		return Receipt{}, err
	}
	task, ok, err := getRecord(t.tx, bucketTasks, td.TaskID, taskKey)
	if err != nil {
		return Receipt{}, err
	}
	if ok && task.InstanceID == td.InstanceID {
		task.LastDone = &done
		task.UpdatedAt = d.ReceivedAt
		if err := putRecord(t.tx, bucketTasks, task.TaskID, task); err != nil {
			return Receipt{}, err
		}
	}
	if onFirst != nil {
		if err := onFirst(t); err != nil {
			return Receipt{}, err
		}
	}
	return Receipt{Key: key, Order: order}, nil
}

func lookupReceipt(tx *bolt.Tx, key DedupeKey, ek []byte) (Receipt, error) {
	d, ok, err := getDelivery(tx, ek)
	if err != nil || !ok {
		return Receipt{Key: key}, err
	}
	return Receipt{Key: key, Duplicate: true, Notified: d.Notified, Order: d.Order}, nil
}

// MarkNotified records that the application was told of the report with
// key. From then on it is never handed out again: not by
// PendingNotifications, and a replay of it is a duplicate. Marking a
// notified report again does nothing; a key that was never recorded (or
// was pruned) is ErrNotFound. The same transaction prunes dedupe keys past
// their retention.
func (s *Store) MarkNotified(key DedupeKey) error {
	if err := key.check(); err != nil {
		return err
	}
	ek := key.encode()
	err := s.Update(func(t *Tx) error {
		tx := t.tx
		d, ok, err := getDelivery(tx, ek)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("%w: task_done %s", ErrNotFound, key)
		case d.Notified:
			return nil
		}
		now := s.stamp()
		d.Notified, d.NotifiedAt, d.TaskDone = true, now, nil
		if err := putDelivery(tx, ek, d); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPendingIdx).Delete(orderKey(d.Order)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketNotifiedIdx).Put(notifiedKey(now, d.Order), ek); err != nil {
			return err
		}
		n, err := getCounter(tx, keyNotifiedCount)
		if err != nil {
			return err
		}
		if err := putCounter(tx, keyNotifiedCount, n+1); err != nil {
			return err
		}
		_, err = s.prune(tx, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("serverstore: mark %s notified: %w", key, err)
	}
	return nil
}

// PendingNotifications returns every recorded report whose notification is
// not done, in receipt order. Call it once at start, before any agent
// connection, and notify (then MarkNotified) each: these are reports whose
// notification a previous run recorded but did not finish.
func (s *Store) PendingNotifications() ([]Delivery, error) {
	out := []Delivery{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPendingIdx).ForEach(func(_, ek []byte) error {
			d, ok, err := getDelivery(tx, ek)
			switch {
			case err != nil:
				return err
			case !ok || d.Notified || d.TaskDone == nil:
				return &CorruptError{Bucket: string(bucketPendingIdx), Key: fmt.Sprintf("%x", ek), Err: errors.New("names no pending delivery")}
			}
			out = append(out, d)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("serverstore: pending notifications: %w", err)
	}
	return out, nil
}

// Delivery returns the record of the report with key; ok is false when it
// was never recorded or was pruned.
func (s *Store) Delivery(key DedupeKey) (d Delivery, ok bool, err error) {
	if err := key.check(); err != nil {
		return Delivery{}, false, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		d, ok, err = getDelivery(tx, key.encode())
		return err
	})
	return d, ok, err
}

// DeliveryCounts returns how many reports are pending notification and
// how many notified dedupe keys are retained.
func (s *Store) DeliveryCounts() (pending, notified int, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		pending = tx.Bucket(bucketPendingIdx).Stats().KeyN
		n, err := getCounter(tx, keyNotifiedCount)
		notified = int(n)
		return err
	})
	return pending, notified, err
}

// Prune removes notified dedupe keys past their retention and returns how
// many. MarkNotified and Open prune too; call it when the server stays up
// long without notifying anything.
func (s *Store) Prune() (removed int, err error) {
	err = s.Update(func(tx *Tx) error {
		removed, err = s.prune(tx.tx, s.stamp())
		return err
	})
	if removed > 0 {
		s.log.Debug().Int("removed", removed).Msg("task_done dedupe keys pruned")
	}
	return removed, err
}

// prune deletes notified keys, oldest notification first, while more than
// MaxKeys are kept or the oldest is older than MaxAge.
func (s *Store) prune(tx *bolt.Tx, now time.Time) (int, error) {
	n, err := getCounter(tx, keyNotifiedCount)
	if err != nil {
		return 0, err
	}
	cutoff := now.Add(-s.retention.MaxAge)
	idx := tx.Bucket(bucketNotifiedIdx)
	deliveries := tx.Bucket(bucketDeliveries)
	removed := 0
	c := idx.Cursor()
	for k, ek := c.First(); k != nil; k, ek = c.First() {
		if n <= uint64(s.retention.MaxKeys) && !notifiedAt(k).Before(cutoff) {
			break
		}
		if err := deliveries.Delete(ek); err != nil {
			return removed, err
		}
		if err := c.Delete(); err != nil {
			return removed, err
		}
		n--
		removed++
	}
	if removed == 0 {
		return 0, nil
	}
	return removed, putCounter(tx, keyNotifiedCount, n)
}

func getDelivery(tx *bolt.Tx, ek []byte) (Delivery, bool, error) {
	raw := tx.Bucket(bucketDeliveries).Get(ek)
	if raw == nil {
		return Delivery{}, false, nil
	}
	key, err := decodeKey(ek)
	if err != nil {
		return Delivery{}, false, &CorruptError{Bucket: string(bucketDeliveries), Key: fmt.Sprintf("%x", ek), Err: err}
	}
	var d Delivery
	if err := json.Unmarshal(raw, &d); err != nil {
		return Delivery{}, false, &CorruptError{Bucket: string(bucketDeliveries), Key: key.String(), Err: err}
	}
	if td := d.TaskDone; td != nil && td.Key() != key {
		return Delivery{}, false, &CorruptError{Bucket: string(bucketDeliveries), Key: key.String(), Err: fmt.Errorf("record holds task_done %s", td.Key())}
	}
	d.Key = key
	return d, true, nil
}

func putDelivery(tx *bolt.Tx, ek []byte, d Delivery) error {
	raw, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("serverstore: encode delivery %s: %w", d.Key, err)
	}
	return tx.Bucket(bucketDeliveries).Put(ek, raw)
}

// orderKey is the pending index key: the receipt order, big endian, so
// that the index iterates in receipt order.
func orderKey(order uint64) []byte { return binary.BigEndian.AppendUint64(nil, order) }

// notifiedKey is the notified index key: notification time (Unix ns with
// the sign bit flipped, so that earlier times sort first even before
// 1970) then the receipt order, which keeps keys of the same instant
// apart.
func notifiedKey(at time.Time, order uint64) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano())^(1<<63))
	return binary.BigEndian.AppendUint64(b, order)
}

func notifiedAt(k []byte) time.Time {
	if len(k) < 8 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(k)^(1<<63)))
}
