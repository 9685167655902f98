package controlapi

import (
	"encoding/json"
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
