package fleet

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/session"
)

// reportOne gives agent's projection a full report of one session at path.
func reportOne(f *Fleet, agent, path string) error {
	p := f.sessions.projection(agent)
	p.Connected(agent)
	_, err := p.ApplyReport(session.Report{Machine: agent, Full: true, Sessions: []session.SessionInfo{
		{SessionID: "s-1", Path: path, Cwd: "/repo", Kind: session.KindTask, UpdatedAt: 1}}})
	return err
}

// storedProjection reads agent's projection back from the state file, once
// every write queued before is committed.
func storedProjection(t *testing.T, f *Fleet, agent string) *session.Projection {
	t.Helper()
	if err := f.store.Update(func(*serverstore.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	raw, err := f.store.GetProjection(agent)
	if err != nil {
		t.Fatal(err)
	}
	p := session.NewProjection()
	if err := p.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return p
}

// The session data has its own lock: the projections, their writes and
// the repositories' HEADs are read and changed while another goroutine
// holds the fleet lock.
func TestTheSessionDataDoesNotWaitForTheFleetLock(t *testing.T) {
	f, _ := pipedFleet(t, 1, 0)
	defer f.Close()
	const agent, path = "box-00000", "/s/one.jsonl"
	whileLockHeld(t, f, f.mu.Lock, "the session data", func() error {
		if err := reportOne(f, agent, path); err != nil {
			return err
		}
		f.sessions.projection(agent).Annotate(agent, path, func(sf *session.ServerFields) { sf.Bundle = "b" })
		f.sessions.persist(agent)
		f.sessions.setHead(agent, "/repo", "abc")
		switch got := f.Sessions(agent); {
		case len(got) != 1 || got[0].Path != path || got[0].Bundle != "b":
			return fmt.Errorf("Sessions(%s) = %+v, want %s with bundle b", agent, got, path)
		case f.sessions.head(agent, "/repo") != "abc":
			return fmt.Errorf("head = %q, want abc", f.sessions.head(agent, "/repo"))
		}
		return nil
	})
	if rec, ok := storedProjection(t, f, agent).Get(agent, path); !ok || rec.Bundle != "b" {
		t.Fatalf("stored projection: %+v (found %v), want bundle b", rec, ok)
	}
	if got := f.sessions.list(""); len(got) != 1 || got[0].agent != agent {
		t.Fatalf("list = %v, want %s only", got, agent)
	}
	if f.sessions.list("elsewhere") != nil || f.Sessions("elsewhere") != nil {
		t.Fatal("an agent without a projection listed one")
	}
}

// Annotations made at once from many goroutines, none holding the fleet
// lock, all reach the state file: each write is the projection as it was
// when queued, so the last one committed holds every annotation before it.
func TestConcurrentProjectionWritesKeepTheNewest(t *testing.T) {
	f, _ := pipedFleet(t, 1, 0)
	defer f.Close()
	const agent, path = "box-00000", "/s/one.jsonl"
	if err := reportOne(f, agent, path); err != nil {
		t.Fatal(err)
	}
	var want []string
	var wg sync.WaitGroup
	for i := range 32 {
		id := fmt.Sprintf("t-%02d", i)
		want = append(want, id)
		wg.Go(func() {
			f.sessions.projection(agent).Annotate(agent, path, func(sf *session.ServerFields) {
				sf.TaskIDs = append(sf.TaskIDs, id)
			})
			f.sessions.persist(agent)
		})
	}
	wg.Wait()
	rec, ok := storedProjection(t, f, agent).Get(agent, path)
	got := slices.Sorted(slices.Values(rec.TaskIDs))
	if !ok || !slices.Equal(got, want) {
		t.Fatalf("stored task ids %v (found %v), want %v", got, ok, want)
	}
}

// A projection write the store refuses (it is closed) is logged, naming
// the agent; persist itself never waits for the store.
func TestAFailedProjectionWriteIsLogged(t *testing.T) {
	st, err := serverstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	ss := newSessionSet(st, zerolog.New(&logged))
	ss.persist("box-00000")
	if out := logged.String(); !strings.Contains(out, "persist session projection") || !strings.Contains(out, "box-00000") {
		t.Fatalf("log after a refused write: %q", out)
	}
}
