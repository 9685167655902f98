package execplane

import (
	"testing"
	"time"

	"example.com/pifleet/transport"
)

func TestDecideEnd(t *testing.T) {
	cases := []struct {
		name  string
		from  ending
		cause cause
		want  ending
		kill  bool
	}{
		{"abort running", ending{}, causeAbort, ending{aborted: true}, true},
		{"timeout running", ending{}, causeTimeout, ending{timedOut: true}, true},
		{"abort after timeout", ending{timedOut: true}, causeAbort, ending{timedOut: true}, false},
		{"timeout after abort", ending{aborted: true}, causeTimeout, ending{aborted: true}, false},
		{"exit", ending{}, causeExit, ending{exited: true}, false},
		{"exit while terminating", ending{aborted: true}, causeExit, ending{aborted: true, exited: true}, false},
		{"abort after exit", ending{exited: true}, causeAbort, ending{exited: true}, false},
	}
	for _, tc := range cases {
		got, kill := decideEnd(tc.from, tc.cause)
		if got != tc.want || kill != tc.kill {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, kill, tc.want, tc.kill)
		}
	}
}

func TestDecideStartTimeout(t *testing.T) {
	base := admission{max: 4, cwdReal: "/w", defTimeout: 300 * time.Second, maxTimeout: time.Hour,
		req: Request{Mode: transport.ExecShell, Command: "x", Cwd: "/w"}}
	if d, err := decideStart(base); err != nil || d != 300*time.Second {
		t.Errorf("default: %v %v", d, err)
	}
	a := base
	a.req.TimeoutSeconds = seconds(1e9)
	if d, _ := decideStart(a); d != time.Hour {
		t.Errorf("capped: %v", d)
	}
	a.req.TimeoutSeconds = seconds(0.25)
	if d, _ := decideStart(a); d != 250*time.Millisecond {
		t.Errorf("fractional: %v", d)
	}
	// Capacity is checked first, before anything else is wrong.
	a = base
	a.active, a.req.Command = 4, ""
	if _, err := decideStart(a); err == nil || err.(*StartError).Code != CodeCapacity {
		t.Errorf("order: %v", err)
	}
	// "/" as a root holds everything.
	a = base
	a.rootsSet, a.rootsReal = true, []string{"/"}
	if _, err := decideStart(a); err != nil {
		t.Errorf("root /: %v", err)
	}
	a.rootsReal = []string{"/wx"}
	if _, err := decideStart(a); err == nil {
		t.Error("/w is not under /wx")
	}
}

func TestDefaultShellIsALoginShell(t *testing.T) {
	sh := defaultShell()
	if len(sh) != 2 || (sh[0] != "/bin/bash" && sh[0] != "/bin/sh") || sh[1] != "-lc" {
		t.Errorf("default shell %q", sh)
	}
}
