package agent

import (
	"encoding/json"
	"testing"

	"example.com/pifleet/session"
)

// revisionArrived decides, at re-adoption, whether a revision prompt the
// dead agent stored reached the worker: only a session whose last user
// message is that prompt says yes (pi records a prompt as it takes it).
func TestRevisionArrived(t *testing.T) {
	const rev = RevisionPrompt + "fix the test"
	msg := func(role string, content any) session.Entry {
		b, err := json.Marshal(map[string]any{"role": role, "content": content})
		if err != nil {
			t.Fatal(err)
		}
		return session.Entry{Type: session.TypeMessage, Role: role, Message: b}
	}
	parts := func(texts ...string) []map[string]string {
		var out []map[string]string
		for _, s := range texts {
			out = append(out, map[string]string{"type": "text", "text": s})
		}
		return out
	}
	draft := []session.Entry{msg("user", "write it"), msg("assistant", parts("draft"))}
	for _, c := range []struct {
		name    string
		entries []session.Entry
		want    bool
	}{
		{"empty session", nil, false},
		{"only the first answer", draft, false},
		{"taken, running", append(draft, msg("user", rev)), true},
		{"taken, answered", append(draft, msg("user", rev), msg("assistant", parts("revised"))), true},
		{"as text parts", append(draft, msg("user", parts(RevisionPrompt, "fix the test"))), true},
		{"after a model change", append(draft, msg("user", rev), session.Entry{Type: session.TypeModelChange}), true},
		{"the same feedback earlier, another prompt since", append(draft, msg("user", rev), msg("assistant", parts("x")), msg("user", "go on")), false},
		{"another feedback", append(draft, msg("user", RevisionPrompt+"other")), false},
		{"a user message not json", append(draft, session.Entry{Type: session.TypeMessage, Role: "user", Message: json.RawMessage(`"x"`)}), false},
	} {
		if got := revisionArrived(c.entries, rev); got != c.want {
			t.Errorf("%s: revisionArrived = %v, want %v", c.name, got, c.want)
		}
	}
}
