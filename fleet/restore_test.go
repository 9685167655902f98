package fleet_test

import (
	"errors"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/internal/serverstore"
)

// A state file written by a version that knows states this one does not
// (an instance or a task in a state it has no name for), or holding a
// session projection it cannot read, still opens: those records are
// skipped, with a warning, and everything else is restored.
func TestRecordsThisVersionCannotReadAreSkippedAtStart(t *testing.T) {
	dir := t.TempDir()
	st, err := serverstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []serverstore.Instance{
		{InstanceID: "i-known", Machine: "box", State: string(fleet.StateStopped), Cwd: "/w", Bundle: "default"},
		{InstanceID: "i-newer", Machine: "box", State: "hibernating", Cwd: "/w", Bundle: "default"},
	} {
		if _, err := st.PutInstance(in); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range []serverstore.Task{
		{TaskID: "t-known", InstanceID: "i-known", Machine: "box", State: string(fleet.TaskStopped), Prompt: "fix it"},
		{TaskID: "t-newer", InstanceID: "i-known", Machine: "box", State: "paused", Prompt: "fix it"},
	} {
		if _, err := st.PutTask(tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutProjection("box", []byte(`["not a projection"]`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	tf := startFleet(t, dir, t.TempDir(), nil)
	var ids []string
	for _, i := range tf.Status(t.Context()).Instances {
		ids = append(ids, i.InstanceID+"="+string(i.State))
	}
	if len(ids) != 1 || ids[0] != "i-known=stopped" {
		t.Errorf("restored instances %v, want only i-known=stopped", ids)
	}
	if task, err := tf.Task("t-known"); err != nil || task.Info().State != fleet.TaskStopped {
		t.Errorf("t-known: %v", err)
	}
	if _, err := tf.Task("t-newer"); !errors.Is(err, fleet.ErrUnknownTask) {
		t.Errorf("t-newer: %v, want ErrUnknownTask (skipped)", err)
	}
	if s := tf.Sessions("box"); len(s) != 0 {
		t.Errorf("sessions of box from an unreadable projection: %v", s)
	}
}
