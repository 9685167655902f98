package serverstore

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SpawnIntent is a spawn the server recorded before it sent it to the
// agent. It is removed once the spawn is answered (and its instance
// stored) or given up. One left over from a server that was killed
// before the answer was stored names a worker the agent may still run
// under this spawn id: the restarted server adopts it, by the spawn id
// the agent lists it with.
type SpawnIntent struct {
	SpawnID    string    `json:"spawnId"`
	Machine    string    `json:"machine"`
	Cwd        string    `json:"cwd"`
	Bundle     string    `json:"bundle"`
	BundleHash string    `json:"bundleHash,omitempty"`
	Model      *ModelRef `json:"model,omitempty"`
	TraceID    string    `json:"traceId,omitempty"`
	// FromSession and SessionMode are the spawn's session (see
	// Instance); StaleBaseline as there.
	FromSession   string    `json:"fromSession,omitempty"`
	SessionMode   string    `json:"sessionMode,omitempty"`
	StaleBaseline bool      `json:"staleBaseline,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
}

// bucketSpawns holds the spawn intents, by spawn id. It came after
// layout 1's buckets: the store creates it in files that lack it.
var bucketSpawns = []byte("spawns")

// keyServerID is the meta bucket key of the store's server id.
var keyServerID = []byte("serverId")

func spawnKey(s *SpawnIntent) string { return s.SpawnID }

// initSpawns creates the spawn intents' bucket and the server id in a
// file that lacks them.
func initSpawns(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketSpawns); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if meta.Get(keyServerID) != nil {
			return nil
		}
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		return meta.Put(keyServerID, []byte(hex.EncodeToString(b[:])))
	})
}

// verifySpawns is verify's part for the spawn intents (a file written
// before they existed has no bucket for them yet).
func verifySpawns(tx *bolt.Tx) error {
	b := tx.Bucket(bucketSpawns)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		_, err := decodeRecord(bucketSpawns, k, v, spawnKey)
		return err
	})
}

// ServerID names this state file's server among the servers an agent
// serves: eight hex digits, made once with the file. The server puts it
// in its spawn ids, so that it tells the workers it spawned from those
// of another server on the same agent.
func (s *Store) ServerID() (string, error) {
	var id string
	err := s.db.View(func(tx *bolt.Tx) error {
		id = string(tx.Bucket(bucketMeta).Get(keyServerID))
		return nil
	})
	if err == nil && id == "" {
		err = &CorruptError{Bucket: string(bucketMeta), Key: string(keyServerID), Err: fmt.Errorf("missing")}
	}
	return id, err
}

// PutSpawnIntent stores in (CreatedAt stamped now when zero), replacing
// the intent with its spawn id.
func (t *Tx) PutSpawnIntent(in SpawnIntent) error {
	if err := checkID("spawnId", in.SpawnID); err != nil {
		return err
	}
	if err := checkID("machine", in.Machine); err != nil {
		return err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = t.s.stamp()
	}
	return putRecord(t.tx, bucketSpawns, in.SpawnID, in)
}

// DeleteSpawnIntents removes the intents of the spawn ids given; a
// missing one is fine.
func (t *Tx) DeleteSpawnIntents(ids ...string) error {
	for _, id := range ids {
		if err := t.tx.Bucket(bucketSpawns).Delete([]byte(id)); err != nil {
			return err
		}
	}
	return nil
}

// PutSpawnIntent is Tx.PutSpawnIntent in its own (queued) transaction.
func (s *Store) PutSpawnIntent(in SpawnIntent) error {
	return s.Update(func(t *Tx) error { return t.PutSpawnIntent(in) })
}

// DeleteSpawnIntents is Tx.DeleteSpawnIntents in its own (queued)
// transaction.
func (s *Store) DeleteSpawnIntents(ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.Update(func(t *Tx) error { return t.DeleteSpawnIntents(ids...) })
}

// SpawnIntents returns every stored intent, by spawn id.
func (s *Store) SpawnIntents() (out []SpawnIntent, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		out, err = listRecords(tx, bucketSpawns, spawnKey)
		return err
	})
	return out, err
}
