package fleet_test

import (
	"errors"
	"strings"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
)

// report makes peer send its full sessions report (once per connection).
func report(t *testing.T, tf *testFleet, p *testAgentPeer, sessions ...transport.SessionInfo) {
	t.Helper()
	p.send(p.conn(), &transport.SessionsReportFrame{Machine: p.machine, Full: true, Sessions: sessions})
	tf.waitUntil(t, p.machine+"'s sessions", func(fleet.Status) bool {
		return len(tf.ListSessions(fleet.SessionFilter{Machine: p.machine})) == len(sessions)
	})
}

// reportChanged makes peer send an incremental report of sessions, which
// then number n in all.
func reportChanged(t *testing.T, tf *testFleet, p *testAgentPeer, n int, sessions ...transport.SessionInfo) {
	t.Helper()
	p.send(p.conn(), &transport.SessionsReportFrame{Machine: p.machine, Sessions: sessions})
	tf.waitUntil(t, p.machine+"'s changed sessions", func(fleet.Status) bool {
		return len(tf.ListSessions(fleet.SessionFilter{Machine: p.machine})) == n
	})
}

// References resolve by path, id or name (the newest of that name); a
// path that two machines hold names both, and an unknown baseline is named
// as the reference (pi-fleet's "unknown baseline: nope").
func TestResolveSession(t *testing.T) {
	a, b := newTestAgentPeer(t, "box-a", true), newTestAgentPeer(t, "box-b", true)
	tf := newTestFleet(t, a, b)
	report(t, tf, a,
		transport.SessionInfo{SessionID: "s-1", Path: "/s/one.jsonl", Name: "baseline:api", Cwd: "/w", Kind: "baseline", Pinned: true, UpdatedAt: 100},
		transport.SessionInfo{SessionID: "s-2", Path: "/s/two.jsonl", Name: "baseline:api", Cwd: "/w", Kind: "baseline", Pinned: true, UpdatedAt: 200})
	report(t, tf, b, transport.SessionInfo{SessionID: "s-3", Path: "/s/one.jsonl", Cwd: "/w", Kind: "scratch", UpdatedAt: 50})

	for ref, want := range map[string]string{"baseline:api": "s-2", "s-1": "s-1", "s-3": "s-3"} {
		if got, err := tf.ResolveSession("", ref); err != nil || got.SessionID != want {
			t.Errorf("ResolveSession(%q) = %s, %v; want %s", ref, got.SessionID, err, want)
		}
	}
	if got, err := tf.ResolveSession("box-b", "/s/one.jsonl"); err != nil || got.SessionID != "s-3" {
		t.Errorf("path on box-b: %+v, %v", got, err)
	}
	if _, err := tf.ResolveSession("", "/s/one.jsonl"); !errors.Is(err, fleet.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "box-a, box-b") {
		t.Errorf("a path two machines hold: %v", err)
	}
	_, err := tf.ResolveSession("", "baseline:nope")
	var ue *fleet.UnknownSessionError
	if !errors.As(err, &ue) || !errors.Is(err, fleet.ErrUnknownSession) || !strings.Contains(err.Error(), "unknown baseline: nope") {
		t.Errorf("unknown baseline: %v", err)
	}
	if v := tf.ListSessions(fleet.SessionFilter{Kind: session.KindScratch}); len(v) != 1 || v[0].Machine != "box-b" {
		t.Errorf("scratch sessions: %+v", v)
	}
}

// A fresh clone still reports its baseline's name until the agent sees the
// task name the server gave it: the registry shows it as the task session
// it is (not pinned, never stale), whether its worker is attached or it
// has tasks, and never lists it among the baselines.
func TestFreshCloneIsListedAsATask(t *testing.T) {
	a := newTestAgentPeer(t, "box-a", true)
	tf := newTestFleet(t, a)
	base := transport.SessionInfo{SessionID: "s-base", Path: "/s/base.jsonl", Name: "baseline:api", Cwd: "/w", Kind: "baseline", Pinned: true, UpdatedAt: 100}
	report(t, tf, a, base)
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Bundle: "default", FromSession: "baseline:api"})
	if err != nil {
		t.Fatal(err)
	}
	clonePath := inst.SessionPath()
	clone := base
	clone.SessionID, clone.Path, clone.ParentSession, clone.UpdatedAt = "s-clone", clonePath, base.Path, 200
	reportChanged(t, tf, a, 2, clone)

	check := func(when string) {
		t.Helper()
		if bs := tf.ListSessions(fleet.SessionFilter{Kind: session.KindBaseline}); len(bs) != 1 || bs[0].Path != base.Path {
			t.Errorf("%s: baselines %+v", when, bs)
		}
		if bs := tf.Status(t.Context()).Baselines; len(bs) != 1 || bs[0].Path != base.Path {
			t.Errorf("%s: status baselines %+v", when, bs)
		}
		ts := tf.ListSessions(fleet.SessionFilter{Kind: session.KindTask})
		if len(ts) != 1 || ts[0].Path != clonePath || ts[0].Info().Pinned || ts[0].StaleBaseline || ts[0].CurrentHead != "" {
			t.Errorf("%s: task sessions %+v", when, ts)
		}
	}
	check("attached")
	task, _ := submitAndFinish(t, tf, inst, "fix it")
	if err := task.Accept(t.Context(), transport.DispositionStop); err != nil {
		t.Fatal(err)
	}
	clone.UpdatedAt = 300
	reportChanged(t, tf, a, 2, clone) // the worker ended: only its task marks it
	check("with a task")
}
