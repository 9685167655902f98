package controlapi

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"unix:/a/b.sock", "/a", "127.0.0.1:1", "[::1]:80", "localhost:0", ":0", "unix:", "x:y:z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddr(s)
		if err != nil {
			return
		}
		// What parses round-trips through String.
		back, err := ParseAddr(a.String())
		if err != nil || back != a {
			t.Fatalf("ParseAddr(%q) = %+v; its String %q parses to %+v, %v", s, a, a.String(), back, err)
		}
	})
}

func FuzzEventReader(f *testing.F) {
	f.Add(": watching\n\nid: 1\nevent: x\ndata: {\"seq\":1,\"kind\":\"x\"}\n\n")
	f.Add(": o\n\ndata: a\ndata: b\r\n\n:c\n\ndata:{}\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		r := newEventReader(strings.NewReader(s))
		if r.awaitOpen() != nil {
			return
		}
		for range 1000 {
			data, err := r.next()
			if err != nil {
				return
			}
			var c Change
			_ = json.Unmarshal(data, &c) // must not panic
		}
	})
}

func FuzzSpawnStream(f *testing.F) {
	f.Add("{\"progress\":{\"phase\":\"accepted\"}}\n{\"result\":{\"instanceId\":\"i\"}}\n")
	f.Add("{\"error\":{\"code\":\"spawn_error\",\"message\":\"m\"}}\n")
	f.Add("\n\n{")
	f.Fuzz(func(t *testing.T, s string) {
		res, err := readSpawnStream(strings.NewReader(s), func(SpawnProgress) {})
		if err == nil && !strings.Contains(s, "result") {
			t.Fatalf("a result %+v from a stream without one: %q", res, s)
		}
	})
}

// requestRoutes are the endpoints that decode a request body or query,
// with a body that is valid for each.
var requestRoutes = []struct{ method, path, body string }{
	{"POST", "/v1/instances", `{"agent":"box","cwd":"/w","bundle":"default"}`},
	{"POST", "/v1/instances/i-1/prompt", `{"text":"hi","wait":false}`},
	{"POST", "/v1/instances/i-1/steer", `{"text":"hi"}`},
	{"POST", "/v1/instances/i-1/abort", ``},
	{"POST", "/v1/instances/i-1/stop", ``},
	{"POST", "/v1/instances/i-1/rebundle", `{"bundle":"b"}`},
	{"PUT", "/v1/instances/i-1/tools", `{"tools":["read"]}`},
	{"PUT", "/v1/instances/i-1/model", `{"provider":"p","id":"m"}`},
	{"PUT", "/v1/instances/i-1/model-pin", `{"pin":true}`},
	{"POST", "/v1/tasks/t-1/accept", `{"disposition":"stop"}`},
	{"POST", "/v1/tasks/t-1/reject", `{"feedback":"again"}`},
	{"PUT", "/v1/trust/box", `{"policy":"steer"}`},
	{"POST", "/v1/ui/u-1", `{"value":"yes"}`},
	{"POST", "/v1/sessions/resume", `{"session":"baseline:api"}`},
	{"POST", "/v1/baselines", `{"agent":"box","cwd":"/w","bundle":"default"}`},
	{"GET", "/v1/instances/i-1/read?path=a.go&offset=1&limit=2", ``},
	{"GET", "/v1/instances/i-1/grep?pattern=x&glob=*.go", ``},
	{"GET", "/v1/sessions/search?q=x&limit=3", ``},
	{"GET", "/v1/instances/i-1/output?events=5", ``},
}

// The server-side decoding of every request: whatever the body (and the
// query), the server answers with a success or a client error (4xx),
// never a server error, and never panics.
func FuzzServerRequests(f *testing.F) {
	for i, r := range requestRoutes {
		f.Add(uint8(i), r.body, "")
		f.Add(uint8(i), `{"text":`, "limit=-1&offset=x")
	}
	f.Add(uint8(0), strings.Repeat("[", 10000), "")
	f.Fuzz(func(t *testing.T, route uint8, body, query string) {
		r := requestRoutes[int(route)%len(requestRoutes)]
		target := r.path
		if query != "" {
			if strings.Contains(target, "?") {
				target += "&" + url.PathEscape(query)
			} else {
				target += "?" + url.PathEscape(query)
			}
		}
		req := httptest.NewRequest(r.method, "http://unix"+target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		NewServer(newRecordingBackend()).ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s with %q: status %d: %s", r.method, target, body, rec.Code, rec.Body)
		}
	})
}

// The valid bodies of the fuzz seeds reach the backend (the target does
// not just bounce off an authentication check).
func TestServerRequestSeedsReachTheBackend(t *testing.T) {
	for _, r := range requestRoutes {
		b := newRecordingBackend()
		req := httptest.NewRequest(r.method, "http://unix"+r.path, strings.NewReader(r.body))
		rec := httptest.NewRecorder()
		NewServer(b).ServeHTTP(rec, req)
		if rec.Code >= 300 || b.Calls() == "" {
			t.Errorf("%s %s: status %d, calls %q: %s", r.method, r.path, rec.Code, b.Calls(), rec.Body)
		}
	}
}

// ReadToken takes any file content: a token (trimmed) or a clear error,
// never an empty token.
func FuzzReadToken(f *testing.F) {
	f.Add("abc\n")
	f.Add("")
	f.Add(" \n\t")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(dir, "token")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		tok, err := ReadToken(path)
		if err == nil && (tok == "" || tok != strings.TrimSpace(content)) {
			t.Fatalf("ReadToken(%q) = %q", content, tok)
		}
	})
}

// FuzzWatchDelta feeds a watch stream's rebuilder arbitrary changes
// after a real streamed update: it must never panic, and what it accepts
// comes out as JSON.
func FuzzWatchDelta(f *testing.F) {
	f.Add(`{"seq":3,"kind":"event","instanceId":"i","event":"message_update","delta":["more"]}`)
	f.Add(`{"seq":3,"kind":"event","instanceId":"i","event":"message_update","delta":{"u":{"type":"text_delta","delta":"<script>"},"o":[[[1,0,1],"d"]]}}`)
	f.Add(`{"seq":3,"kind":"event","instanceId":"i","event":"message_update","delta":{"u":{},"o":[[[9,9],"v",1]]}}`)
	f.Add(`{"seq":3,"kind":"event","instanceId":"other","delta":["x"]}`)
	f.Add(`{"seq":3,"kind":"dropped","delta":["x"]}`)
	f.Add(`{"seq":3,"kind":"event","instanceId":"i","data":{},"delta":["x"]}`)
	f.Fuzz(func(t *testing.T, s string) {
		r := newDeltaRebuilder()
		var base []wireChange
		for _, c := range answerChanges("i", "hello, this is a streamed answer")[:3] {
			base = append(base, wireChange{Change: Change{Kind: c.Kind, InstanceID: c.InstanceID, Event: c.Event, Data: c.Worker.Raw()}})
		}
		for _, w := range base {
			if _, err := r.rebuild(w); err != nil {
				t.Fatal(err)
			}
		}
		for line := range strings.SplitSeq(s, "\n") {
			var w wireChange
			if json.Unmarshal([]byte(line), &w) != nil {
				continue
			}
			c, err := r.rebuild(w)
			if err != nil {
				if !errors.Is(err, ErrWatchDelta) {
					t.Fatalf("error %v does not wrap ErrWatchDelta", err)
				}
				continue
			}
			if c.Data != nil && !json.Valid(c.Data) {
				t.Fatalf("rebuilt data that is not JSON: %q", c.Data)
			}
		}
	})
}
