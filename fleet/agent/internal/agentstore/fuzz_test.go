package agentstore

import (
	"encoding/binary"
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/transport"
)

// FuzzDecodeEntry: a stored outbox entry of any bytes decodes, or is a
// *CorruptError; one that decodes is the task_done its key says.
func FuzzDecodeEntry(f *testing.F) {
	key := binary.BigEndian.AppendUint64(nil, 1_760_000_000_000)
	td := done("i-1", "t-1")
	td.Seq = 1_760_000_000_000
	frame, _ := transport.MarshalFrame(td)
	f.Add(key, []byte(`{"taskId":"t-1","owner":"o","frame":`+string(frame[:len(frame)-1])+`}`))
	f.Add(key, []byte(`{"frame":{}}`))
	f.Add([]byte{1}, []byte(`{}`))
	f.Fuzz(func(t *testing.T, k, v []byte) {
		e, err := decodeEntry(k, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if e.Frame == nil || e.Frame.Seq != e.Seq.Float() {
			t.Fatalf("decoded %+v from %q", e, v)
		}
	})
}

// FuzzStoredSpec: an instance record (a worker's spec and state) of any
// bytes reads back, or is a *CorruptError; listing skips it without
// failing.
func FuzzStoredSpec(f *testing.F) {
	f.Add([]byte(`{"instanceId":"i-1","cwd":"/w","bundle":"default","state":"running"}`))
	f.Add([]byte(`{"instanceId":3}`))
	f.Add([]byte(``))
	s, _ := open(f, newClock())
	f.Fuzz(func(t *testing.T, v []byte) {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketInstances).Put([]byte("i-fuzz"), v)
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Instance("i-fuzz"); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Instance: %v is neither a record nor ErrCorrupt", err)
		}
		if _, err := s.Instances(); err != nil {
			t.Fatalf("Instances failed on one bad record: %v", err)
		}
	})
}
