//go:build unix

package fleet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// publishFaux publishes bundle "faux": the offline scripted provider of
// testdata/pi as an extension, and the model faux/faux-1. The real pi gets
// both only through the fleet's provisioning.
func publishFaux(t *testing.T, root string) {
	t.Helper()
	publishFauxAs(t, root, "faux", `{"primary":{"provider":"faux","id":"faux-1"}}`)
}

// publishFauxAs publishes the faux provider as bundle name with the model
// policy model (bundle.json's "model"), and the extensions exts (their
// bundle paths → their source) after it.
func publishFauxAs(t *testing.T, root, name, model string, exts ...map[string]string) {
	t.Helper()
	ext, err := os.ReadFile(pitest.FauxProvider(t))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"ext/faux-provider.ts": string(ext)}
	list := []string{`"ext/faux-provider.ts"`}
	for _, m := range exts {
		for rel, content := range m {
			files[rel] = content
			list = append(list, `"`+rel+`"`)
		}
	}
	files["bundle.json"] = `{"extensions":[` + strings.Join(list, ",") + `],"model":` + model + `}`
	src := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(src, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := registry.Publish(root, name, src, registry.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The core flow with the real pi through the SDK and the real agent
// daemon: spawn → prompt → settled with the answer; task → task_done →
// reject → the revision in the same session → accept with stop → stopped,
// the session file holding both the task and its revision.
func TestEndToEndWithTheRealPi(t *testing.T) {
	pitest.Find(t)
	reg := t.TempDir()
	publishFaux(t, reg)
	addr, ps := startAgentOf(t, pitest.RealPi, reg)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)

	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "faux"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = inst.Stop(context.Background()) // t.Context is done in cleanups
		}
	})
	text, err := inst.Prompt(t.Context(), "say: hello from pi", fleet.PromptOptions{})
	if err != nil || text != "hello from pi" {
		t.Fatalf("Prompt = %q, %v", text, err)
	}

	task, err := inst.Submit(t.Context(), "bash: echo first-draft", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := tf.report(t); r.TaskID != task.ID() || r.Status != "settled" || !strings.Contains(r.Summary, "first-draft") {
		t.Fatalf("first report %+v", r)
	}
	tf.waitInstance(t, inst.ID(), fleet.StateAwaitingReview)
	if esc, err := task.Reject(t.Context(), "say: second draft"); err != nil || esc {
		t.Fatalf("Reject = %v, %v", esc, err)
	}
	if r := tf.report(t); r.TaskID != task.ID() || r.LastAssistantMessage != "second draft" {
		t.Fatalf("revision report %+v", r)
	}
	tf.waitInstance(t, inst.ID(), fleet.StateAwaitingReview)
	var session string
	for _, is := range tf.Status(t.Context()).Instances {
		if is.InstanceID == inst.ID() {
			session = is.SessionRef
		}
	}
	if err := task.Accept(t.Context(), transport.DispositionStop); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if got := inst.State(); got != fleet.StateStopped {
		t.Errorf("after accept stop: %s", got)
	}

	// One session: the untracked prompt, the task, its tool result and
	// the revision with its answer, in that order.
	if session == "" {
		t.Fatal("the instance has no session file")
	}
	raw, err := os.ReadFile(session)
	if err != nil {
		t.Fatal(err)
	}
	at := 0
	for _, want := range []string{"say: hello from pi", "bash: echo first-draft", "first-draft", "Revision requested", "say: second draft", "second draft"} {
		i := strings.Index(string(raw[at:]), want)
		if i < 0 {
			t.Fatalf("session %s lacks %q after byte %d:\n%s", session, want, at, raw)
		}
		at += i + len(want)
	}
}
