package serverstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"
)

// FuzzDecodeKey: the stored key parser accepts exactly the canonical
// encodings of valid keys, and never panics.
func FuzzDecodeKey(f *testing.F) {
	f.Add(DedupeKey{InstanceID: "i-1", TaskID: "t-1", Seq: 1_760_000_000_000}.encode())
	f.Add(DedupeKey{InstanceID: "i:1", TaskID: "t", Seq: math.Copysign(0, -1)}.encode())
	f.Add([]byte{})
	f.Add([]byte{0x80, 0x00, 'a', 1, 'b', 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := decodeKey(b)
		if err != nil {
			return
		}
		if err := k.check(); err != nil {
			t.Fatalf("decoded an invalid key %+v: %v", k, err)
		}
		if !bytes.Equal(k.encode(), b) {
			t.Fatalf("decodeKey accepted a non-canonical form %x of %+v", b, k)
		}
	})
}

// FuzzDedupeKeyRoundTrip: every valid key survives encode and decode, and
// two keys share a stored form only when they are the same key.
func FuzzDedupeKeyRoundTrip(f *testing.F) {
	f.Add("i-1", "t-1", 1.0, "i-1", "t-1", 2.0)
	f.Add("i:1", "t", 5.0, "i", "1:t", 5.0)
	f.Fuzz(func(t *testing.T, i1, t1 string, s1 float64, i2, t2 string, s2 float64) {
		a := DedupeKey{InstanceID: i1, TaskID: t1, Seq: s1}
		b := DedupeKey{InstanceID: i2, TaskID: t2, Seq: s2}
		if a.check() != nil || b.check() != nil {
			return
		}
		got, err := decodeKey(a.encode())
		if err != nil || got != a {
			t.Fatalf("round trip of %+v: %+v, %v", a, got, err)
		}
		if bytes.Equal(a.encode(), b.encode()) != (a == b) {
			t.Fatalf("%+v and %+v: equal stored forms %v, equal keys %v", a, b, bytes.Equal(a.encode(), b.encode()), a == b)
		}
	})
}

// FuzzDecodeRecords: a stored task, instance or agent record of any bytes
// decodes, or is a *CorruptError naming its bucket and key; a record that
// decodes names its own key and re-encodes to one that decodes the same.
func FuzzDecodeRecords(f *testing.F) {
	f.Add([]byte(`{"taskId":"t-1","instanceId":"i-1","agent":"box"}`), "t-1")
	f.Add([]byte(`{"instanceId":"i-1","agent":"box","state":"idle"}`), "i-1")
	f.Add([]byte(`{"name":"box","addresses":["127.0.0.1:1"]}`), "box")
	f.Add([]byte(`{"taskId":7}`), "t")
	f.Add([]byte(`null`), "")
	f.Fuzz(func(t *testing.T, raw []byte, key string) {
		check := func(name string, err error, roundTrip func() error) {
			if err != nil {
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Key != key {
					t.Fatalf("%s: %v is not a CorruptError for key %q", name, err, key)
				}
				return
			}
			if err := roundTrip(); err != nil {
				t.Fatalf("%s: re-encoded record: %v", name, err)
			}
		}
		task, err := decodeRecord([]byte("tasks"), []byte(key), raw, taskKey)
		check("task", err, func() error {
			b, _ := json.Marshal(task)
			_, err := decodeRecord([]byte("tasks"), []byte(key), b, taskKey)
			return err
		})
		inst, err := decodeRecord([]byte("instances"), []byte(key), raw, instanceKey)
		check("instance", err, func() error {
			b, _ := json.Marshal(inst)
			_, err := decodeRecord([]byte("instances"), []byte(key), b, instanceKey)
			return err
		})
		ag, err := decodeRecord([]byte("agents"), []byte(key), raw, agentKey)
		check("agent", err, func() error {
			b, _ := json.Marshal(ag)
			_, err := decodeRecord([]byte("agents"), []byte(key), b, agentKey)
			return err
		})
	})
}
