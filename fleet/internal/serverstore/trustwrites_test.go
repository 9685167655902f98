package serverstore

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// The trust store kept in the state file writes through its queue
// (UpdateBolt): decisions about machines met at the same moment wait
// together and are committed in one transaction, with the store's other
// changes.
func TestTrustDecisionsJoinTheWriteQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openT(t, t.TempDir())
		var mu sync.Mutex
		txs := map[int]int{}
		ts, err := trust.New(st.DB(), TrustBucket, trust.WithPrompter(trust.Fixed(trust.Allow)),
			trust.WithWrites(func(fn func(*bolt.Tx) error) error {
				return st.UpdateBolt(func(tx *bolt.Tx) error {
					mu.Lock()
					txs[tx.ID()]++
					mu.Unlock()
					return fn(tx)
				})
			}))
		if err != nil {
			t.Fatal(err)
		}
		release := blockWriter(t, st)
		const n = 50
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				_, errs[i] = ts.DecideKey(t.Context(), identity.Identity{Machine: fmt.Sprintf("box-%02d", i)}, fmt.Sprintf("ed25519:%02d", i))
			})
		}
		task := st.Queue(func(tx *Tx) error {
			_, err := tx.PutTask(Task{TaskID: "t-1", InstanceID: "i-1", State: "running"})
			return err
		}, nil)
		synctest.Wait() // every decision waits behind the held commit
		release()
		wg.Wait()
		if err := task.Wait(); err != nil {
			t.Fatal(err)
		}
		for i, err := range errs {
			if err != nil {
				t.Errorf("box-%02d: %v", i, err)
			}
		}
		if len(txs) != 1 {
			t.Errorf("%d decisions made together committed in %d transactions, want 1: %v", n, len(txs), txs)
		}
		list, err := ts.List()
		if err != nil || len(list) != n {
			t.Fatalf("%d decisions stored (%v), want %d", len(list), err, n)
		}
	})
}
