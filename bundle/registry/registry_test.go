package registry_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/registry"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func writeTree(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func publish(t testing.TB, root, name string, files map[string]string) *bundle.Manifest {
	t.Helper()
	m, err := registry.Publish(root, name, writeTree(t, t.TempDir(), files), registry.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPublishLayoutAndRepublish(t *testing.T) {
	root := t.TempDir()
	src := writeTree(t, t.TempDir(), map[string]string{
		"README.md": "hello\n", "skills/greet/SKILL.md": "# greet\n", "old.txt": "old",
		"bundle.json": `{"skills":["skills"],"tools":{"active":["read","grep"]}}`,
	})
	m, err := registry.Publish(root, "default", src, registry.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(root, "default", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(onDisk) != string(m.Encode()) {
		t.Errorf("manifest.json is not the encoded manifest:\n%s", onDisk)
	}
	for _, f := range m.Files {
		data, err := os.ReadFile(filepath.Join(root, "default", "files", filepath.FromSlash(f.Path)))
		if err != nil || sum(string(data)) != f.SHA256 {
			t.Errorf("published %s: %v", f.Path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "default", "files", "bundle.json")); err == nil {
		t.Error("bundle.json was published as a file")
	}
	readme := filepath.Join(root, "default", "files", "README.md")
	before, _ := os.Stat(readme)

	// Republish: one file changed, one removed.
	writeTree(t, src, map[string]string{"skills/greet/SKILL.md": "# greet v2\n"})
	if err := os.Remove(filepath.Join(src, "old.txt")); err != nil {
		t.Fatal(err)
	}
	m2, err := registry.Publish(root, "default", src, registry.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m2.BundleHash == m.BundleHash {
		t.Error("bundleHash did not change")
	}
	after, _ := os.Stat(readme)
	if !os.SameFile(before, after) {
		t.Error("an unchanged file was copied again")
	}
	if _, err := os.Stat(filepath.Join(root, "default", "files", "old.txt")); err != nil {
		t.Error("a file of the previous version was removed; the manifest is the allow-list")
	}
	shown, err := registry.Show(root, "default")
	if err != nil || shown.BundleHash != m2.BundleHash {
		t.Errorf("Show = %v, %v", shown, err)
	}
}

func TestListAndShow(t *testing.T) {
	root := t.TempDir()
	publish(t, root, "beta", map[string]string{"a": "1", "b": "22"})
	publish(t, root, "alpha", map[string]string{"a": "1"})
	writeTree(t, root, map[string]string{"broken/manifest.json": "{", ".hidden/x": "", "not a name/manifest.json": "{}"})
	entries, err := registry.List(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s %d %d %v", e.Name, e.Files, e.Bytes, e.Err != nil))
	}
	if d := cmp.Diff([]string{"alpha 1 1 false", "beta 2 3 false", "broken 0 0 true"}, got); d != "" {
		t.Errorf("List (-want +got):\n%s", d)
	}
	if _, err := registry.Show(root, "nope"); !errors.Is(err, bundle.CodeNotFound) {
		t.Errorf("Show(nope) = %v, want not_found", err)
	}
	if _, err := registry.Show(root, "broken"); !errors.Is(err, bundle.CodeInvalidManifest) {
		t.Errorf("Show(broken) = %v, want invalid_manifest", err)
	}
	if entries, err := registry.List(filepath.Join(root, "missing")); err != nil || entries != nil {
		t.Errorf("List of a missing root = %v, %v", entries, err)
	}
}

type response struct {
	status int
	ctype  string
	body   string
}

func get(t *testing.T, srv *httptest.Server, method, path string) response {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.ContentLength != int64(len(body)) && method != http.MethodHead {
		t.Errorf("%s %s: content-length %d, body %d bytes", method, path, resp.ContentLength, len(body))
	}
	return response{resp.StatusCode, resp.Header.Get("Content-Type"), string(body)}
}

// rawStatus sends a request target that net/http's client refuses to build.
func rawStatus(t *testing.T, srv *httptest.Server, target string) int {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: registry\r\nConnection: close\r\n\r\n", target)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestServerEndpoints(t *testing.T) {
	root := t.TempDir()
	m := publish(t, root, "default", map[string]string{"a.txt": "alpha", "dir/b c.txt": "beta"})
	srv := httptest.NewServer(registry.NewServer(root))
	defer srv.Close()

	j, bin := "application/json", "application/octet-stream"
	for _, tc := range []struct {
		method, path string
		want         response
	}{
		{"GET", "/healthz", response{200, j, `{"ok":true,"service":"pi-fleet-registry"}`}},
		{"GET", "/v1/bundles/default/manifest", response{200, j, compactJSON(m)}},
		{"GET", "/v1/bundles/default/manifest?x=1", response{200, j, compactJSON(m)}},
		{"GET", "/v1/bundles/default/file?path=a.txt&hash=" + sum("alpha"), response{200, bin, "alpha"}},
		{"GET", "/v1/bundles/default/file?hash=" + sum("beta") + "&path=dir%2Fb+c.txt", response{200, bin, "beta"}},
		{"GET", "/v1/bundles/default/file?path=a.txt&hash=" + sum("wrong"), response{404, j, `{"error":"file_not_in_manifest"}`}},
		{"GET", "/v1/bundles/default/file?path=nope.txt&hash=" + sum("alpha"), response{404, j, `{"error":"file_not_in_manifest"}`}},
		{"GET", "/v1/bundles/default/file?path=../../etc/passwd&hash=x", response{400, j, `{"error":"unsafe_path"}`}},
		{"GET", "/v1/bundles/default/file?path=/etc/passwd&hash=x", response{400, j, `{"error":"unsafe_path"}`}},
		{"GET", "/v1/bundles/default/file?path=%zz&hash=x", response{400, j, `{"error":"unsafe_path"}`}},
		{"GET", "/v1/bundles/default/file", response{400, j, `{"error":"unsafe_path"}`}},
		{"GET", "/v1/bundles/nope/manifest", response{404, j, `{"error":"bundle_not_found"}`}},
		{"GET", "/v1/bundles/.x/manifest", response{400, j, `{"error":"invalid_bundle_name"}`}},
		{"GET", "/v1/bundles/a%2Fb/manifest", response{400, j, `{"error":"invalid_bundle_name"}`}},
		{"GET", "/v1/bundles/default/other", response{404, j, `{"error":"not_found"}`}},
		{"GET", "/v1/bundles/default/manifest/x", response{404, j, `{"error":"not_found"}`}},
		{"GET", "/", response{404, j, `{"error":"not_found"}`}},
		{"POST", "/healthz", response{405, j, `{"error":"method_not_allowed"}`}},
		{"HEAD", "/v1/bundles/default/manifest", response{405, j, ""}},
	} {
		if got := get(t, srv, tc.method, tc.path); got != tc.want {
			t.Errorf("%s %s = %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}

	// Malformed percent-encoding in the path never reaches the handler: Go's
	// server answers 400 itself (the reference answers 500).
	if status := rawStatus(t, srv, "/v1/bundles/%zz/manifest"); status != 400 {
		t.Errorf("malformed percent-encoding in the name: status %d, want 400", status)
	}

	// A published file that went missing, or changed size, is file_missing.
	filesDir := filepath.Join(root, "default", "files")
	if err := os.WriteFile(filepath.Join(filesDir, "a.txt"), []byte("alpha!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := get(t, srv, "GET", "/v1/bundles/default/file?path=a.txt&hash="+sum("alpha")); got.status != 404 || got.body != `{"error":"file_missing"}` {
		t.Errorf("file of the wrong size: %+v", got)
	}
	if err := os.Remove(filepath.Join(filesDir, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if got := get(t, srv, "GET", "/v1/bundles/default/file?path=a.txt&hash="+sum("alpha")); got.status != 404 || got.body != `{"error":"file_missing"}` {
		t.Errorf("missing file: %+v", got)
	}
}

func TestServerFollowsRepublishAndInvalidManifests(t *testing.T) {
	root := t.TempDir()
	publish(t, root, "b", map[string]string{"a.txt": "1"})
	srv := httptest.NewServer(registry.NewServer(root))
	defer srv.Close()
	first := get(t, srv, "GET", "/v1/bundles/b/manifest").body

	m2 := publish(t, root, "b", map[string]string{"a.txt": "2"})
	if got := get(t, srv, "GET", "/v1/bundles/b/manifest").body; got == first || got != compactJSON(m2) {
		t.Errorf("after a republish the server serves %s, want %s", got, compactJSON(m2))
	}
	if got := get(t, srv, "GET", "/v1/bundles/b/file?path=a.txt&hash="+sum("2")); got.body != "2" {
		t.Errorf("new file: %+v", got)
	}
	// A manifest.json edited into something invalid is bundle_not_found.
	if err := os.WriteFile(filepath.Join(root, "b", "manifest.json"), []byte(`{"v":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := get(t, srv, "GET", "/v1/bundles/b/manifest"); got.status != 404 || got.body != `{"error":"bundle_not_found"}` {
		t.Errorf("invalid manifest: %+v", got)
	}
}

func TestServerGate(t *testing.T) {
	root := t.TempDir()
	publish(t, root, "b", map[string]string{"a.txt": "1"})
	allow := make(chan bool, 1)
	allow <- false
	var seen netip.Addr
	gate := func(ctx context.Context, peer netip.Addr) error {
		seen = peer
		ok := <-allow
		allow <- ok
		if !ok {
			return errors.New("not a tailnet peer")
		}
		return nil
	}
	srv := httptest.NewServer(registry.NewServer(root, registry.WithGate(gate)))
	defer srv.Close()
	for _, p := range []string{"/healthz", "/v1/bundles/b/manifest", "/nope"} {
		if got := get(t, srv, "GET", p); got.status != 403 || got.body != `{"error":"forbidden"}` {
			t.Errorf("refused peer, GET %s = %+v", p, got)
		}
	}
	if !seen.IsLoopback() || !seen.Is4() {
		t.Errorf("gate saw peer %v, want the IPv4 loopback", seen)
	}
	<-allow
	allow <- true
	if got := get(t, srv, "GET", "/healthz"); got.status != 200 {
		t.Errorf("admitted peer: %+v", got)
	}
}

func TestHTTPClient(t *testing.T) {
	root := t.TempDir()
	m := publish(t, root, "b", map[string]string{"a.txt": "alpha"})
	writeTree(t, root, map[string]string{"bad/manifest.json": `{"v":1}`})
	srv := httptest.NewServer(registry.NewServer(root))
	defer srv.Close()
	c, err := registry.Open(srv.URL + "//")
	if err != nil {
		t.Fatal(err)
	}
	if c.Origin() != srv.URL {
		t.Errorf("Origin = %s, want %s (trailing slashes removed)", c.Origin(), srv.URL)
	}
	ctx := context.Background()
	got, err := c.Manifest(ctx, "b")
	if err != nil || got.BundleHash != m.BundleHash {
		t.Fatalf("Manifest = %v, %v", got, err)
	}
	rc, err := c.Open(ctx, "b", m.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "alpha" {
		t.Errorf("file = %q", data)
	}
	var re *registry.Error
	if _, err := c.Manifest(ctx, "nope"); !errors.Is(err, bundle.CodeNotFound) || !errors.As(err, &re) || re.Registry != srv.URL || re.Bundle != "nope" {
		t.Errorf("missing bundle: %v", err)
	}
	if _, err := c.Manifest(ctx, "bad"); !errors.Is(err, bundle.CodeInvalidManifest) && !errors.Is(err, bundle.CodeNotFound) {
		t.Errorf("invalid manifest: %v", err)
	}
	wrong := m.Files[0]
	wrong.SHA256 = sum("x")
	if _, err := c.Open(ctx, "b", wrong); !errors.As(err, &re) || re.Status != 404 || !strings.Contains(err.Error(), "404") {
		t.Errorf("wrong hash: %v", err)
	}

	srv.Close()
	if _, err := c.Manifest(ctx, "b"); !errors.Is(err, bundle.CodeUnreachable) || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("closed server: %v, want unreachable naming the URL", err)
	}
}

// A registry that serves a manifest the schema refuses, or fails with a
// 5xx, is told apart from a missing bundle.
func TestHTTPClientStatusMapping(t *testing.T) {
	body := map[string]string{"/v1/bundles/invalid/manifest": `{"v":1}`, "/v1/bundles/unsafe/manifest": `{"v":1,"name":"u","bundleHash":"` +
		bundle.Hash([]bundle.File{{Path: "../x", SHA256: sum("x")}}) + `","files":[{"path":"../x","sha256":"` + sum("x") + `","bytes":1}]}`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, ok := body[r.URL.Path]; ok {
			io.WriteString(w, b)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	c, err := registry.NewHTTP(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Manifest(ctx, "invalid"); !errors.Is(err, bundle.CodeInvalidManifest) {
		t.Errorf("invalid: %v", err)
	}
	_, err = c.Manifest(ctx, "unsafe")
	if !errors.Is(err, bundle.CodeInvalidManifest) || !errors.Is(err, bundle.CodeUnsafePath) {
		t.Errorf("unsafe paths: %v, want invalid_manifest wrapping unsafe_path", err)
	}
	var re *registry.Error
	if _, err := c.Manifest(ctx, "broken"); !errors.Is(err, bundle.CodeUnreachable) || !errors.As(err, &re) || re.Status != 500 {
		t.Errorf("500: %v", err)
	}
}

func TestHTTPClientTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := registry.NewHTTP(srv.URL, registry.WithTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Manifest(context.Background(), "b")
	if !errors.Is(err, bundle.CodeUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hung registry: %v, want unreachable after the timeout", err)
	}
}

func TestDirClient(t *testing.T) {
	root := t.TempDir()
	m := publish(t, root, "b", map[string]string{"a.txt": "alpha"})
	ctx := context.Background()
	for _, loc := range []string{root, "file://" + filepath.ToSlash(root)} {
		c, err := registry.Open(loc)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(c.Origin(), "file:///") {
			t.Errorf("Origin = %s", c.Origin())
		}
		got, err := c.Manifest(ctx, "b")
		if err != nil || got.BundleHash != m.BundleHash {
			t.Fatalf("%s: Manifest = %v, %v", loc, got, err)
		}
		rc, err := c.Open(ctx, "b", m.Files[0])
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
		if _, err := c.Manifest(ctx, "missing"); !errors.Is(err, bundle.CodeNotFound) {
			t.Errorf("missing bundle: %v, want not_found", err)
		}
	}
	// A manifest.json that cannot be read (here: a directory) is unreachable.
	if err := os.MkdirAll(filepath.Join(root, "weird", "manifest.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.NewDir(root).Manifest(ctx, "weird"); !errors.Is(err, bundle.CodeUnreachable) {
		t.Errorf("unreadable manifest: %v, want unreachable", err)
	}
	if _, err := registry.NewDir(filepath.Join(root, "gone")).Manifest(ctx, "b"); !errors.Is(err, bundle.CodeNotFound) {
		t.Errorf("deleted registry: %v, want not_found", err)
	}
	if _, err := registry.Open("file://remote.example/x"); err == nil {
		t.Error("a file URL with a remote host was accepted")
	}
	if _, err := registry.Open(""); err == nil {
		t.Error("an empty location was accepted")
	}
}

// statusRecorder notes the status of every response.
type statusRecorder struct {
	http.ResponseWriter
	status *[]int
}

func (s statusRecorder) WriteHeader(code int) {
	*s.status = append(*s.status, code)
	s.ResponseWriter.WriteHeader(code)
}

// A client that already holds a bundle's manifest gets a 304 instead of the
// body, and reuses what it parsed; a republish is seen at once.
func TestHTTPClientReusesAnUnchangedManifest(t *testing.T) {
	root := t.TempDir()
	publish(t, root, "b", map[string]string{"a.txt": "1"})
	server := registry.NewServer(root)
	var statuses []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		server.ServeHTTP(statusRecorder{w, &statuses}, r)
	}))
	defer srv.Close()
	c, _ := registry.NewHTTP(srv.URL)
	ctx := context.Background()
	first, err := c.Manifest(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Manifest(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Error("an unchanged manifest was parsed again")
	}
	if d := cmp.Diff([]int{200, 304}, statuses); d != "" {
		t.Errorf("statuses (-want +got):\n%s", d)
	}
	m2 := publish(t, root, "b", map[string]string{"a.txt": "2"})
	third, err := c.Manifest(ctx, "b")
	if err != nil || third.BundleHash != m2.BundleHash {
		t.Errorf("after a republish: %v, %v", third, err)
	}
}

// A registry that ignores If-None-Match (the TypeScript one) sends the same
// bytes again: the client still reuses its parsed manifest.
func TestHTTPClientReusesIdenticalBytes(t *testing.T) {
	root := t.TempDir()
	m := publish(t, root, "b", map[string]string{"a.txt": "1"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, compactJSON(m)) // no ETag, no 304
	}))
	defer srv.Close()
	c, _ := registry.NewHTTP(srv.URL)
	first, err1 := c.Manifest(context.Background(), "b")
	second, err2 := c.Manifest(context.Background(), "b")
	if err1 != nil || err2 != nil || first != second || first.BundleHash != m.BundleHash {
		t.Errorf("got %p %v, %p %v", first, err1, second, err2)
	}
}

// compactJSON is the manifest as a registry serves it.
func compactJSON(m *bundle.Manifest) string {
	b, _ := m.MarshalJSON()
	return string(b)
}
