package serverstore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Spawn intents survive a reopen until deleted, and the server id is made
// once with the file and kept.
func TestSpawnIntentsAndTheServerIDSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	id, err := s.ServerID()
	if err != nil || len(id) != 8 {
		t.Fatalf("server id %q, %v", id, err)
	}
	in := SpawnIntent{SpawnID: "spawn-" + id + "-1", Machine: "box", Cwd: "/w", Bundle: "b", TraceID: "tr",
		Model: &ModelRef{Provider: "p", ID: "m"}, FromSession: "/s.jsonl", SessionMode: "attach"}
	for _, x := range []SpawnIntent{in, {SpawnID: "spawn-" + id + "-2", Machine: "box"}} {
		if err := s.PutSpawnIntent(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutSpawnIntent(SpawnIntent{SpawnID: "x"}); err == nil {
		t.Error("an intent without a machine was stored")
	}
	s.Close()

	s = openT(t, dir)
	if again, err := s.ServerID(); err != nil || again != id {
		t.Errorf("server id after reopening: %q, %v; want %q", again, err, id)
	}
	list, err := s.SpawnIntents()
	if err != nil || len(list) != 2 {
		t.Fatalf("intents after reopening: %+v, %v", list, err)
	}
	if list[0].CreatedAt.IsZero() {
		t.Error("CreatedAt not stamped")
	}
	list[0].CreatedAt = in.CreatedAt
	if d := cmp.Diff(in, list[0]); d != "" {
		t.Errorf("intent after reopening (-stored +read):\n%s", d)
	}
	if err := s.DeleteSpawnIntents(in.SpawnID, "spawn-unknown"); err != nil {
		t.Fatal(err)
	}
	if list, err := s.SpawnIntents(); err != nil || len(list) != 1 || list[0].SpawnID != "spawn-"+id+"-2" {
		t.Errorf("after the delete: %+v, %v", list, err)
	}
}
