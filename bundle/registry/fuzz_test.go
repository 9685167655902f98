package registry_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"example.com/pifleet/bundle/registry"
)

// FuzzServer sends arbitrary paths and queries: the server never fails
// (no 5xx), and serves file bytes only for a path and hash its manifest
// lists.
func FuzzServer(f *testing.F) {
	root := f.TempDir()
	m := publish(f, root, "b", map[string]string{"a.txt": "alpha", "d/e f.txt": "x"})
	srv := registry.NewServer(root)
	for _, s := range []string{
		"/v1/bundles/b/manifest", "/v1/bundles/b/file?path=a.txt&hash=" + m.Files[0].SHA256, "/healthz",
		"/v1/bundles/%62/file?path=d%2Fe+f.txt&hash=" + m.Files[1].SHA256, "/v1/bundles/b/file?path=%zz", "/v1/bundles/../manifest",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		p, q, _ := strings.Cut(target, "?")
		if !strings.HasPrefix(p, "/") {
			return
		}
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL = &url.URL{Path: p, RawPath: p, RawQuery: q}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		switch rec.Code {
		case 200:
			if rec.Header().Get("Content-Type") == "application/octet-stream" {
				body := rec.Body.String()
				if body != "alpha" && body != "x" {
					t.Fatalf("%s served %q", target, body)
				}
			}
		case 400, 404:
		default:
			t.Fatalf("%s: status %d", target, rec.Code)
		}
	})
}
