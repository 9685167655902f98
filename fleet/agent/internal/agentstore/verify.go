package agentstore

import (
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// verify reads every record of the file once, at open: a record that
// does not decode makes the file corrupt, refused before any of it is
// used (a worker re-adopted from a misread record, or a task_done
// silently skipped, would be worse). The kv bucket holds opaque values.
func verify(tx *bolt.Tx) error {
	if v := tx.Bucket(bucketMeta).Get(keyLastSeq); v != nil && len(v) != 8 {
		return &CorruptError{Bucket: string(bucketMeta), Key: string(keyLastSeq), Err: fmt.Errorf("%d bytes, want 8", len(v))}
	}
	err := tx.Bucket(bucketInstances).ForEach(func(k, v []byte) error {
		var inst Instance
		if err := json.Unmarshal(v, &inst); err != nil {
			return &CorruptError{Bucket: string(bucketInstances), Key: string(k), Err: err}
		}
		if inst.InstanceID != string(k) {
			return &CorruptError{Bucket: string(bucketInstances), Key: string(k), Err: fmt.Errorf("record names %q", inst.InstanceID)}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tx.Bucket(bucketOutbox).ForEach(func(k, v []byte) error {
		if v == nil {
			return &CorruptError{Bucket: string(bucketOutbox), Key: fmt.Sprintf("%x", k), Err: errors.New("a bucket where a record belongs")}
		}
		_, err := decodeEntry(k, v)
		return err
	})
}
