package serverstore

import (
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// verify reads every record of the file once, at open: a record that
// does not decode (or an index entry that names nothing) makes the file
// corrupt, refused before any of it is used. The trust bucket is the
// trust store's, which reads its own records.
func verify(tx *bolt.Tx) error {
	if _, err := getCounter(tx, keyNotifiedCount); err != nil {
		return err
	}
	each := func(bucket []byte, check func(k, v []byte) error) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			if v == nil {
				return &CorruptError{Bucket: string(bucket), Key: string(k), Err: errors.New("a bucket where a record belongs")}
			}
			return check(k, v)
		})
	}
	checks := []struct {
		bucket []byte
		check  func(k, v []byte) error
	}{
		{bucketTasks, func(k, v []byte) error { _, err := decodeRecord(bucketTasks, k, v, taskKey); return err }},
		{bucketInstances, func(k, v []byte) error { _, err := decodeRecord(bucketInstances, k, v, instanceKey); return err }},
		{bucketAgents, func(k, v []byte) error { _, err := decodeRecord(bucketAgents, k, v, agentKey); return err }},
		{bucketProjections, func(k, v []byte) error {
			if !json.Valid(v) {
				return &CorruptError{Bucket: string(bucketProjections), Key: string(k), Err: errors.New("not a JSON document")}
			}
			return nil
		}},
		{bucketDeliveries, func(k, _ []byte) error { _, _, err := getDelivery(tx, k); return err }},
		{bucketPendingIdx, func(k, ek []byte) error {
			d, ok, err := getDelivery(tx, ek)
			switch {
			case err != nil:
				return err
			case len(k) != 8 || !ok || d.Notified || d.TaskDone == nil:
				return &CorruptError{Bucket: string(bucketPendingIdx), Key: fmt.Sprintf("%x", k), Err: errors.New("names no pending delivery")}
			}
			return nil
		}},
		{bucketNotifiedIdx, func(k, ek []byte) error {
			if _, ok, err := getDelivery(tx, ek); err != nil || !ok || len(k) != 16 {
				return errors.Join(err, &CorruptError{Bucket: string(bucketNotifiedIdx), Key: fmt.Sprintf("%x", k), Err: errors.New("names no delivery")})
			}
			return nil
		}},
	}
	for _, c := range checks {
		if err := each(c.bucket, c.check); err != nil {
			return err
		}
	}
	return verifySpawns(tx)
}
