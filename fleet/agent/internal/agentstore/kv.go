package agentstore

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// MaxKeyBytes is the longest key the key/value space accepts (bbolt's
// limit).
const MaxKeyBytes = bolt.MaxKeySize

func checkKey(key string) error {
	switch {
	case key == "":
		return &InvalidError{Field: "key", Reason: "empty"}
	case len(key) > MaxKeyBytes:
		return &InvalidError{Field: "key", Reason: fmt.Sprintf("%d bytes, max %d", len(key), MaxKeyBytes)}
	}
	return nil
}

// PutKV stores value under key, replacing any previous value. Keys are
// free-form; a prefix per user (e.g. "cursor/<instanceId>") keeps them
// apart.
func (s *Store) PutKV(key string, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketKV).Put([]byte(key), value)
	})
	if err != nil {
		return fmt.Errorf("agentstore: put %q: %w", key, err)
	}
	return nil
}

// GetKV returns a copy of the value under key, and false when there is
// none.
func (s *Store) GetKV(key string) ([]byte, bool, error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	var out []byte
	found := false
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketKV).Get([]byte(key)); v != nil {
			out, found = append([]byte{}, v...), true // v is only valid inside the transaction
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("agentstore: get %q: %w", key, err)
	}
	return out, found, nil
}

// DeleteKV removes key; a missing key is fine.
func (s *Store) DeleteKV(key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketKV).Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("agentstore: delete %q: %w", key, err)
	}
	return nil
}

// PutCursor stores a counter (a stream seq, a ring position) under key.
func (s *Store) PutCursor(key string, v uint64) error {
	return s.PutKV(key, binary.BigEndian.AppendUint64(nil, v))
}

// Cursor returns the counter under key, and false when there is none. A
// value that is not a counter matches ErrCorrupt.
func (s *Store) Cursor(key string) (uint64, bool, error) {
	v, ok, err := s.GetKV(key)
	if err != nil || !ok {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, &CorruptError{Bucket: string(bucketKV), Key: key, Err: fmt.Errorf("cursor of %d bytes, want 8", len(v))}
	}
	return binary.BigEndian.Uint64(v), true, nil
}
