package main

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/session"
)

func TestSessionsNotesAndWarnings(t *testing.T) {
	b := &scriptedBackend{sessions: sampleSessions(),
		search: controlapi.SearchResult{Hits: []controlapi.SessionHit{}, Failed: []controlapi.SearchFailure{
			{Machine: "mac", Error: &controlapi.Error{Code: controlapi.CodeNotConnected, Message: "mac is lost"}}}},
		resumed: controlapi.SpawnResult{InstanceID: "i-9", FromSession: "/s/base.jsonl", StaleBaseline: true}}
	api := apiServer(t, b)

	// A machine whose listing may be out of date is named on stderr.
	status, _, errOut := runCLI(t, "sessions", api)
	if status != 0 || errOut != "note: the sessions of mac may be out of date (its registry is stale)\n" {
		t.Errorf("sessions: %d, stderr %q", status, errOut)
	}
	// Agents that could not be searched are named; the hits (none) still
	// print.
	status, out, errOut := runCLI(t, "sessions", "search", "anything", api)
	if status != 0 || out != "no hits\n" || !strings.Contains(errOut, "warning: mac not searched: not_connected: mac is lost") {
		t.Errorf("search: %d %q %q", status, out, errOut)
	}
	status, out, _ = runCLI(t, "sessions", "search", "anything", "--json", api)
	var res controlapi.SearchResult
	if err := json.Unmarshal([]byte(out), &res); status != 0 || err != nil || len(res.Failed) != 1 || res.Hits == nil {
		t.Errorf("search --json: %d %v %s", status, err, out)
	}
	// A worker started from a stale baseline: the id alone on stdout, the
	// warning on stderr.
	status, out, errOut = runCLI(t, "resume", "baseline:api", api)
	if status != 0 || out != "i-9\n" || !strings.Contains(errOut, "stale baseline: the repository of /s/base.jsonl has moved on") {
		t.Errorf("resume of a stale baseline: %d %q %q", status, out, errOut)
	}
	b.sessions = nil
	if _, out, _ := runCLI(t, "sessions", api); out != "no sessions\n" {
		t.Errorf("no sessions: %q", out)
	}
}

func TestSessionErrorsReachTheUser(t *testing.T) {
	b := &scriptedBackend{err: &controlapi.Error{Code: controlapi.CodeSessionPinned,
		Message: "fleet: session is pinned: /s/base.jsonl (baseline:api) is a pinned session; resume it as a clone"}}
	api := apiServer(t, b)
	status, out, errOut := runCLI(t, "resume", "baseline:api", "--attach", api)
	if status == 0 || out != "" || !strings.Contains(errOut, "session_pinned: fleet: session is pinned: /s/base.jsonl (baseline:api) is a pinned session; resume it as a clone") {
		t.Errorf("resume --attach of a baseline: %d %q %q", status, out, errOut)
	}
	b.err = &controlapi.Error{Code: controlapi.CodeUnknownSession, Message: "fleet: unknown baseline: nope"}
	if status, _, errOut := runCLI(t, "spawn", "--from-session=baseline:nope", api); status == 0 || !strings.Contains(errOut, "unknown_session: fleet: unknown baseline: nope") {
		t.Errorf("spawn from an unknown baseline: %d %q", status, errOut)
	}
	b.err = nil
	before := b.callCount()
	for _, tc := range []struct {
		args []string
		text string
	}{
		{[]string{"spawn", "--attach", "--agent=a", "--cwd=/", "--bundle=b"}, "--attach needs --from-session"},
		{[]string{"spawn", "--agent=a", "--cwd=/"}, "spawn needs --agent, --cwd and --bundle (or --from-session)"},
		{[]string{"sessions", "--kind=draft"}, `--kind "draft" is not baseline, task or scratch`},
		{[]string{"baseline", "create", "--agent=a", "--cwd=/r"}, "--bundle"},
		{[]string{"baseline", "create", "--agent=a", "--cwd=/r", "--bundle=b", "--settle-timeout=-1s"}, "cannot be negative"},
		{[]string{"resume"}, "<session>"},
		{[]string{"sessions", "search"}, "<query>"},
	} {
		status, _, errOut := runCLI(t, append(tc.args, api)...)
		if status == 0 || !strings.Contains(errOut, tc.text) {
			t.Errorf("%v: %d %q; want a refusal mentioning %q", tc.args, status, errOut, tc.text)
		}
	}
	if after := b.callCount(); after != before {
		t.Errorf("%d refused command line(s) reached the server", after-before)
	}
}

func (b *scriptedBackend) callCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

// Status carries the baselines (stale flag included) and each instance's
// origin. (The fleet lists a fresh clone still under its baseline's name as
// a task: fleet's TestFreshCloneIsListedAsATask.)
func TestStatusShowsBaselinesAndOrigins(t *testing.T) {
	base := fleet.SessionView{Record: session.Record{SessionID: "s", Path: "/s/base.jsonl", Name: "baseline:api", Machine: "box", Cwd: "/r",
		Kind: session.KindBaseline, Pinned: true, ServerFields: session.ServerFields{GitHead: "h1", PinnedByServer: true}},
		StaleBaseline: true, CurrentHead: "h2"}
	st := fleet.Status{
		Instances: []fleet.InstanceStatus{{InstanceID: "i-2", Agent: "box", FromSession: "/s/base.jsonl", StaleBaseline: true}},
		Baselines: []fleet.SessionView{base},
	}
	out := statusOf(st)
	if len(out.Baselines) != 1 || out.Baselines[0].Path != "/s/base.jsonl" || !out.Baselines[0].Pinned || !out.Baselines[0].StaleBaseline {
		t.Errorf("baselines of status: %+v", out.Baselines)
	}
	if in := out.Instances[0]; in.FromSession != "/s/base.jsonl" || in.SessionMode != controlapi.SessionClone || !in.StaleBaseline {
		t.Errorf("instance: %+v", in)
	}
}

func TestSnippetAround(t *testing.T) {
	long := strings.Repeat("x", 100) + " the Zanzibar module " + strings.Repeat("y", 100)
	for _, tc := range []struct {
		snippet, query string
		want           string
	}{
		{"short\nsnippet", "x", "short snippet"},
		{long, "zanzibar", "…" + strings.Repeat("x", 30) + " the Zanzibar module " + strings.Repeat("y", 27) + "…"},
		{"zanzibar " + strings.Repeat("y", 100), "ZANZIBAR", "zanzibar " + strings.Repeat("y", 69) + "…"},
		{strings.Repeat("y", 100) + " zanzibar", "zanzibar", "…" + strings.Repeat("y", 69) + " zanzibar"},
		{strings.Repeat("é", 100) + "ZANZIBAR", "zanzibar", "…" + strings.Repeat("é", 70) + "ZANZIBAR"},
		{long, "absent", strings.Repeat("x", 79) + "…"},
	} {
		got := snippetAround(tc.snippet, tc.query, 80)
		if got != tc.want {
			t.Errorf("snippetAround(…, %q) =\n%q\nwant\n%q", tc.query, got, tc.want)
		}
		if n := len([]rune(got)); n > 80 {
			t.Errorf("snippetAround(…, %q) has %d runes", tc.query, n)
		}
	}
}

func FuzzSnippetAround(f *testing.F) {
	f.Add(strings.Repeat("x", 100)+" the Zanzibar module", "zanzibar", 80)
	f.Add("İstanbul \xff\xfe ünïcode "+strings.Repeat("é", 90), "ÜNÏ", 20)
	f.Add("a", "", 3)
	f.Fuzz(func(t *testing.T, snippet, query string, n int) {
		if n < 3 || n > 500 {
			return
		}
		got := snippetAround(snippet, query, n)
		if c := len([]rune(got)); c > n {
			t.Fatalf("snippetAround(%q, %q, %d) = %q: %d runes", snippet, query, n, got, c)
		}
		if strings.ContainsAny(got, "\n\r\t") {
			t.Fatalf("snippetAround(%q, %q, %d) = %q: not one line", snippet, query, n, got)
		}
		line := strings.Join(strings.Fields(snippet), " ")
		q := strings.Map(unicode.ToLower, strings.Join(strings.Fields(query), " "))
		lowerGot := strings.Map(unicode.ToLower, got)
		if q != "" && len([]rune(q)) <= n-2 && strings.Contains(strings.Map(unicode.ToLower, line), q) && !strings.Contains(lowerGot, q) {
			t.Fatalf("snippetAround(%q, %q, %d) = %q hides the match", snippet, query, n, got)
		}
	})
}
