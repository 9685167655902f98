package session

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func paths(infos []SessionInfo) []string {
	out := []string{}
	for _, s := range infos {
		out = append(out, s.Path)
	}
	return out
}

func TestWatcherPoll(t *testing.T) {
	root := copyAgentRoot(t)
	p := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	w := NewWatcher(NewLister(root))
	ctx := context.Background()
	full, err := w.Full(ctx)
	if err != nil || len(full.Sessions) != 5 {
		t.Fatalf("full: %d sessions, %v", len(full.Sessions), err)
	}
	d, err := w.Poll(ctx)
	if err != nil || !d.Empty() || d.Added == nil || d.Removed == nil {
		t.Fatalf("nothing changed, yet %+v, %v", d, err)
	}

	// Created: a new clone; the empty file gets its header (pi flushed);
	// changed: a rename appended; removed: the legacy file.
	fresh := p("--work-api--/2026-05-05T00-00-00-000Z_0196a1b2-0000-7000-8000-000000000005.jsonl")
	writeFile(t, fresh, header("0196a1b2-0000-7000-8000-000000000005"))
	writeFile(t, p(emptyFile), header("0196a1b2-0000-7000-8000-000000000004"))
	appendFile(t, p(baselineFile), `{"type":"session_info","id":"a0000009","parentId":"a0000008","timestamp":"2026-05-06T00:00:00.000Z","name":"baseline:api-v2"}`+"\n")
	setMtime(t, p(baselineFile), fixtureTime(10))
	if err := os.Remove(p(legacyFile)); err != nil {
		t.Fatal(err)
	}
	d, err = w.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{fresh, p(emptyFile)}, paths(d.Added), sortStrings); diff != "" {
		t.Errorf("added (-want +got):\n%s", diff)
	}
	if len(d.Updated) != 1 || d.Updated[0].Path != p(baselineFile) || d.Updated[0].Name != "baseline:api-v2" || d.Updated[0].UpdatedAt != MillisOf(fixtureTime(10)) {
		t.Errorf("updated = %+v", d.Updated)
	}
	if len(d.Removed) != 1 || d.Removed[0].Path != p(legacyFile) || d.Removed[0].SessionID != "legacy-1" {
		t.Errorf("removed = %+v", d.Removed)
	}
	if d, _ := w.Poll(ctx); !d.Empty() {
		t.Errorf("second poll without changes: %+v", d)
	}
}

var sortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })

func TestWatcherRunTicks(t *testing.T) {
	root := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		w := NewWatcher(NewLister(root))
		ctx, cancel := context.WithCancel(context.Background())
		diffs := make(chan Diff, 4)
		done := make(chan error)
		go func() { done <- w.Run(ctx, 2*time.Second, func(d Diff) { diffs <- d }) }()

		path := filepath.Join(root, "s.jsonl")
		writeFile(t, path, header("sid"))
		time.Sleep(time.Second) // virtual: not a tick yet
		synctest.Wait()
		if len(diffs) != 0 {
			t.Fatal("emitted before the interval passed")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case d := <-diffs:
			if len(d.Added) != 1 || d.Added[0].Path != path {
				t.Errorf("first tick: %+v", d)
			}
		default:
			t.Fatal("no diff after the first tick")
		}
		time.Sleep(10 * time.Second) // nothing changes: nothing is emitted
		synctest.Wait()
		if len(diffs) != 0 {
			t.Errorf("emitted an empty diff: %+v", <-diffs)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if d := <-diffs; len(d.Removed) != 1 {
			t.Errorf("after removal: %+v", d)
		}
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run returned %v", err)
		}
	})
}
