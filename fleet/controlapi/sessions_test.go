package controlapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSessionRoundTrips(t *testing.T) {
	for name, connect := range transports(t) {
		t.Run(name, func(t *testing.T) {
			b := newRecordingBackend()
			at := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
			base := Session{Machine: "gpu-1", SessionID: "s-1", Path: "/s/base.jsonl", Name: "baseline:api", Cwd: "/src/api",
				Kind: KindBaseline, Pinned: true, Bundle: "default", GitHead: "abc", UpdatedAt: at, Registry: "synced",
				StaleBaseline: true, CurrentHead: "def"}
			clone := Session{Machine: "gpu-1", SessionID: "s-2", Path: "/s/clone.jsonl", Name: "task:t-1:fix", Cwd: "/src/api",
				Kind: KindTask, ParentSession: "/s/base.jsonl", TaskIDs: []string{"t-1"}, AttachedInstanceID: "i-2", UpdatedAt: at}
			b.sessions = []Session{clone, base}
			b.status = Status{
				Agents: []Agent{}, Tasks: []Task{},
				Instances: []Instance{{ID: "i-2", Agent: "gpu-1", Cwd: "/src/api", State: "running", Bundle: "default",
					Session: "/s/clone.jsonl", FromSession: "/s/base.jsonl", SessionMode: SessionClone, StaleBaseline: true}},
				Baselines: []Session{base},
			}
			b.search = SearchResult{
				Hits:   []SessionHit{{Machine: "gpu-1", SessionID: "s-1", Path: "/s/base.jsonl", Snippet: "…flaky tests…"}},
				Failed: []SearchFailure{{Machine: "mac", Error: &Error{Code: CodeNotConnected, Message: "mac"}}},
			}
			b.baseline = Baseline{Machine: "gpu-1", Cwd: "/src/api", Name: "baseline:api", Path: "/s/base.jsonl", SessionID: "s-1",
				GitHead: "abc", Bundle: "default", BundleHash: "h", Compacted: true, Summary: "learned"}
			b.resume = SpawnResult{InstanceID: "i-3", TraceID: "tr-3", SessionPath: "/s/clone2.jsonl", FromSession: "/s/base.jsonl",
				SessionMode: SessionClone, StaleBaseline: true}
			c := connect(b)
			ctx := context.Background()

			st, err := c.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(b.status, st); diff != "" {
				t.Errorf("Status (-sent +received):\n%s", diff)
			}
			ss, err := c.Sessions(ctx, SessionFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(b.sessions, ss); diff != "" {
				t.Errorf("Sessions (-sent +received):\n%s", diff)
			}
			if _, err := c.Sessions(ctx, SessionFilter{Machine: "gpu 1/x", Kind: KindBaseline}); err != nil {
				t.Error(err)
			}
			res, err := c.SearchSessions(ctx, SessionSearch{Query: "flaky & tests=?", Cwd: "/src/api"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(b.search, res); diff != "" {
				t.Errorf("SearchSessions (-sent +received):\n%s", diff)
			}
			if !errors.Is(res.Failed[0].Error, ErrNotConnected) {
				t.Errorf("a failed agent's error is not typed: %#v", res.Failed[0].Error)
			}
			if _, err := c.SearchSessions(ctx, SessionSearch{Query: "x", Machine: "gpu-1"}); err != nil {
				t.Error(err)
			}
			bl, err := c.CreateBaseline(ctx, BaselineRequest{Agent: "gpu-1", Cwd: "/src/api", Bundle: "default", Prompt: "look around",
				Repo: "api", SettleTimeoutSeconds: 60})
			if err != nil || bl != b.baseline {
				t.Errorf("CreateBaseline = %+v, %v", bl, err)
			}
			rs, err := c.Resume(ctx, ResumeRequest{Session: "baseline:api", Bundle: "other"}, nil)
			if err != nil || rs != b.resume {
				t.Errorf("Resume = %+v, %v", rs, err)
			}
			// A spawn from a session needs no agent, cwd or bundle.
			if _, err := c.Spawn(ctx, SpawnRequest{FromSession: "task:t-1:fix", SessionMode: SessionAttach}, nil); err != nil {
				t.Errorf("Spawn from a session: %v", err)
			}

			want := strings.Join([]string{
				"Status",
				`Sessions machine="" kind=""`,
				`Sessions machine="gpu 1/x" kind="baseline"`, // a query value is escaped and restored
				`SearchSessions q="flaky & tests=?" machine="" cwd="/src/api"`,
				`SearchSessions q="x" machine="gpu-1" cwd=""`,
				`CreateBaseline {"agent":"gpu-1","cwd":"/src/api","bundle":"default","prompt":"look around","repo":"api","settleTimeoutSeconds":60}`,
				`Resume {"session":"baseline:api","bundle":"other"}`,
				`Spawn {"fromSession":"task:t-1:fix","sessionMode":"attach"}`,
			}, "\n")
			if diff := cmp.Diff(want, b.Calls()); diff != "" {
				t.Errorf("backend calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSessionErrorCodes: the registry's refusals keep their code and get
// their HTTP status, through the client and on the wire.
func TestSessionErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		backendErr error
		want       error
		wantStatus int
	}{
		{&Error{Code: CodeUnknownSession, Message: "fleet: unknown baseline: nope"}, ErrUnknownSession, http.StatusNotFound},
		{&Error{Code: CodeSessionPinned, Message: "fleet: session is pinned: /s/base.jsonl (baseline:api) is a pinned session; resume it as a clone"},
			ErrSessionPinned, http.StatusConflict},
		{&Error{Code: CodeSessionBusy, Message: "fleet: session in use: /s/c.jsonl is attached to instance i-2"}, ErrSessionBusy, http.StatusConflict},
	} {
		t.Run(string(tc.want.(*Error).Code), func(t *testing.T) {
			b := newRecordingBackend()
			b.err = tc.backendErr
			addr := serve(t, b, DefaultAddr(shortDir(t)))
			c := client(t, addr)
			ctx := context.Background()
			msg := tc.backendErr.Error()
			_, err := c.Resume(ctx, ResumeRequest{Session: "baseline:api", Mode: SessionAttach}, nil)
			if !errors.Is(err, tc.want) || err.Error() != msg {
				t.Errorf("Resume = %v; want %v", err, tc.backendErr)
			}
			for _, other := range []error{ErrUnknownSession, ErrSessionPinned, ErrSessionBusy, ErrInvalidState} {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("%v matches %v", err, other)
				}
			}
			if _, err := c.Spawn(ctx, SpawnRequest{FromSession: "baseline:api", SessionMode: SessionAttach}, nil); !errors.Is(err, tc.want) {
				t.Errorf("Spawn = %v; want %v", err, tc.want)
			}
			if _, err := c.Sessions(ctx, SessionFilter{}); !errors.Is(err, tc.want) {
				t.Errorf("Sessions = %v; want %v", err, tc.want)
			}
			resp := rawRequest(t, addr, "", http.MethodPost, "/v1/sessions/resume", `{"session":"baseline:api","mode":"attach"}`)
			var e Error
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != tc.wantStatus || e.Code != tc.want.(*Error).Code {
				t.Errorf("HTTP %d %+v (%v); want %d %s", resp.StatusCode, e, err, tc.wantStatus, tc.want)
			}
		})
	}
}

// TestResumeStreamsProgress: a resume that provisions answers like a
// spawn, and a refusal after progress is the stream's last line.
func TestResumeStreamsProgress(t *testing.T) {
	b := newRecordingBackend()
	b.spawnProgress = []SpawnProgress{{Phase: "accepted"}, {Phase: "provisioning", FilesTotal: 2, FilesFetched: 2}}
	b.resume = SpawnResult{InstanceID: "i-4", FromSession: "/s/a.jsonl", SessionMode: SessionAttach}
	c := client(t, serve(t, b, DefaultAddr(shortDir(t))))
	var got []SpawnProgress
	res, err := c.Resume(context.Background(), ResumeRequest{Session: "/s/a.jsonl", Mode: SessionAttach}, func(p SpawnProgress) { got = append(got, p) })
	if err != nil || res != b.resume {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	if diff := cmp.Diff(b.spawnProgress, got); diff != "" {
		t.Errorf("progress (-sent +received):\n%s", diff)
	}
	b.spawnErr = &Error{Code: CodeSessionBusy, Message: "attached to i-2"}
	if _, err := c.Resume(context.Background(), ResumeRequest{Session: "/s/a.jsonl"}, nil); !errors.Is(err, ErrSessionBusy) {
		t.Errorf("Resume refused after progress = %v; want session_busy", err)
	}
}

func TestSessionBadRequests(t *testing.T) {
	b := newRecordingBackend()
	addr := serve(t, b, DefaultAddr(shortDir(t)))
	for _, tc := range []struct {
		method, path, body string
		text               string
	}{
		{"GET", "/v1/sessions?kind=draft", "", `kind "draft"`},
		{"GET", "/v1/sessions/search", "", "needs a query"},
		{"GET", "/v1/sessions/search?q=%20&machine=m", "", "needs a query"},
		{"POST", "/v1/baselines", `{"agent":"a","cwd":"/x"}`, "needs a bundle"},
		{"POST", "/v1/baselines", `{"cwd":"/x","bundle":"b"}`, "needs an agent"},
		{"POST", "/v1/baselines", `{"agent":"a","cwd":"/x","bundle":"b","settleTimeoutSeconds":-1}`, "negative"},
		{"POST", "/v1/sessions/resume", `{}`, "needs a session"},
		{"POST", "/v1/sessions/resume", `{"session":"s","mode":"fork"}`, `"fork"`},
		{"POST", "/v1/instances", `{"agent":"a","cwd":"/x","bundle":"b","sessionMode":"attach"}`, "needs a fromSession"},
		{"POST", "/v1/instances", `{"fromSession":"s","sessionMode":"move"}`, `"move"`},
		{"POST", "/v1/instances", `{"cwd":"/x","bundle":"b"}`, "needs an agent (or a fromSession)"},
	} {
		resp := rawRequest(t, addr, "", tc.method, tc.path, tc.body)
		var e Error
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Errorf("%s %s: %v", tc.method, tc.path, err)
			continue
		}
		if e.Code != CodeBadRequest || !strings.Contains(e.Message, tc.text) || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s %s = %d %+v; want bad_request mentioning %q", tc.method, tc.path, tc.body, resp.StatusCode, e, tc.text)
		}
	}
	if calls := b.Calls(); calls != "" {
		t.Errorf("bad requests reached the backend:\n%s", calls)
	}
}

func TestEmptyListsAreArrays(t *testing.T) {
	b := newRecordingBackend()
	addr := serve(t, b, DefaultAddr(shortDir(t)))
	for path, want := range map[string]string{
		"/v1/sessions":            "[]\n",
		"/v1/sessions/search?q=x": `{"hits":[]}` + "\n",
	} {
		resp := rawRequest(t, addr, "", http.MethodGet, path, "")
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != want {
			t.Errorf("GET %s = %q (%v); want %q", path, got, err, want)
		}
	}
}
