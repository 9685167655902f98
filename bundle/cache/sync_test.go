package cache_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/cache"
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

// testRegistry is a registry root served over loopback HTTP.
type testRegistry struct {
	t    testing.TB
	root string
	srv  *httptest.Server
	// wrap, when set, may answer a request instead of the registry.
	mu   sync.Mutex
	wrap func(w http.ResponseWriter, r *http.Request) bool
}

func newRegistry(t testing.TB) *testRegistry {
	t.Helper()
	tr := &testRegistry{t: t, root: t.TempDir()}
	handler := registry.NewServer(tr.root)
	tr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.mu.Lock()
		wrap := tr.wrap
		tr.mu.Unlock()
		if wrap != nil && wrap(w, r) {
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(tr.srv.Close)
	return tr
}

func (tr *testRegistry) setWrap(f func(w http.ResponseWriter, r *http.Request) bool) {
	tr.mu.Lock()
	tr.wrap = f
	tr.mu.Unlock()
}

func (tr *testRegistry) publish(name string, files map[string]string) *bundle.Manifest {
	tr.t.Helper()
	src := writeTree(tr.t, tr.t.TempDir(), files)
	m, err := registry.Publish(tr.root, name, src, registry.PublishOptions{})
	if err != nil {
		tr.t.Fatal(err)
	}
	return m
}

func (tr *testRegistry) client() registry.Client {
	tr.t.Helper()
	c, err := registry.NewHTTP(tr.srv.URL)
	if err != nil {
		tr.t.Fatal(err)
	}
	return c
}

func openCache(t testing.TB) *cache.Cache {
	t.Helper()
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fast retries keep failure tests quick; the pauses are not what they check.
type constantBackoff time.Duration

func (b constantBackoff) ForAttempt(float64) time.Duration { return time.Duration(b) }

var quick = cache.SyncOptions{Backoff: constantBackoff(time.Millisecond)}

// entries lists the cache root, ignoring an empty by-name directory.
func entries(t testing.TB, root string) []string {
	t.Helper()
	des, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range des {
		if d.Name() == cache.PointerDir {
			if inner, _ := os.ReadDir(filepath.Join(root, d.Name())); len(inner) == 0 {
				continue
			}
		}
		out = append(out, d.Name())
	}
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func TestFreshSyncThenCacheHit(t *testing.T) {
	reg := newRegistry(t)
	m := reg.publish("default", map[string]string{
		"a.txt": "alpha", "sub/b.txt": "beta", "skills/greet/SKILL.md": "# greet\n", "extensions/hello.ts": "export default () => {}",
		"bundle.json": `{"skills":["skills"],"extensions":["extensions/hello.ts"],"tools":{"active":["read"]}}`,
	})
	c := openCache(t)
	var seen []cache.Progress
	res, err := c.Sync(context.Background(), reg.client(), "default", cache.SyncOptions{Progress: func(p cache.Progress) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != cache.StatusReady || res.BundleHash != m.BundleHash || res.CacheHit || res.Dir != filepath.Join(c.Root(), m.BundleHash) {
		t.Errorf("result = %+v", res)
	}
	if d := cmp.Diff([]string{"a.txt", "extensions/hello.ts", "skills/greet/SKILL.md", "sub/b.txt"}, sorted(res.Fetched)); d != "" {
		t.Errorf("fetched (-want +got):\n%s", d)
	}
	wantTrail := []cache.SyncState{"fetch_manifest", "cache_check", "diffing", "fetching", "validating", "swapping", "ready"}
	if d := cmp.Diff(wantTrail, res.Trail); d != "" {
		t.Errorf("trail (-want +got):\n%s", d)
	}
	data, err := os.ReadFile(filepath.Join(res.Dir, "sub", "b.txt"))
	if err != nil || string(data) != "beta" {
		t.Errorf("sub/b.txt = %q, %v", data, err)
	}
	if d := cmp.Diff(bundle.Resources{
		Skills:     []string{filepath.Join(res.Dir, "skills")},
		Extensions: []string{filepath.Join(res.Dir, "extensions", "hello.ts")},
		Tools:      []string{"read"},
	}, res.Resources); d != "" {
		t.Errorf("resources (-want +got):\n%s", d)
	}
	// The pointer has the TypeScript layout.
	ptr, err := os.ReadFile(filepath.Join(c.Root(), "by-name", "default.json"))
	if err != nil || string(ptr) != `{"bundleHash":"`+m.BundleHash+`","manifest":`+compactJSON(m)+`}` {
		t.Errorf("pointer = %s, %v", ptr, err)
	}
	// Progress: every state, file counts up to the total.
	last := seen[len(seen)-1]
	if last.State != cache.StateReady || last.Fetched != 4 || last.FilesTotal != 4 || last.FetchedBytes != last.BytesTotal {
		t.Errorf("last progress = %+v", last)
	}
	if err := c.Verify(m); err != nil {
		t.Errorf("Verify after a sync: %v", err)
	}
	if entries := entries(t, c.Root()); !slices.Equal(sorted(entries), []string{m.BundleHash, "by-name"}) {
		t.Errorf("cache root holds %v", entries)
	}

	again, err := c.Sync(context.Background(), reg.client(), "default", cache.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.CacheHit || len(again.Fetched) != 0 || again.Status != cache.StatusReady {
		t.Errorf("second sync = %+v, want a cache hit with no fetch", again)
	}
	if d := cmp.Diff([]cache.SyncState{"fetch_manifest", "cache_check", "ready"}, again.Trail); d != "" {
		t.Errorf("trail (-want +got):\n%s", d)
	}
}

func TestSyncFetchesOnlyChangedAndAddedFiles(t *testing.T) {
	reg := newRegistry(t)
	reg.publish("b", map[string]string{"same.txt": "same", "changed.txt": "old", "removed.txt": "bye", "dir/same2.txt": "same2"})
	c := openCache(t)
	v1, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Republish from a fresh source: same, changed, added; removed is gone.
	m2, err := registry.Publish(reg.root, "b", writeTree(t, t.TempDir(), map[string]string{
		"same.txt": "same", "changed.txt": "new", "added.txt": "hi", "dir/same2.txt": "same2",
	}), registry.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var requested []string
	var mu sync.Mutex
	reg.setWrap(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		requested = append(requested, r.URL.Query().Get("path"))
		mu.Unlock()
		return false
	})
	v2, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"added.txt", "changed.txt"}, sorted(v2.Fetched)); d != "" {
		t.Errorf("fetched (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"dir/same2.txt", "same.txt"}, sorted(v2.Reused)); d != "" {
		t.Errorf("reused (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"", "added.txt", "changed.txt"}, sorted(requested)); d != "" { // "" is the manifest
		t.Errorf("requests (-want +got):\n%s", d)
	}
	names, _ := os.ReadDir(v2.Dir)
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	if d := cmp.Diff([]string{"added.txt", "changed.txt", "dir", "same.txt"}, got); d != "" {
		t.Errorf("new version holds (-want +got):\n%s", d)
	}
	if data, _ := os.ReadFile(filepath.Join(v2.Dir, "changed.txt")); string(data) != "new" {
		t.Errorf("changed.txt = %q", data)
	}
	// The old version is untouched.
	if err := c.Verify(v1.Manifest); err != nil {
		t.Errorf("old version damaged: %v", err)
	}
	if err := c.Verify(m2); err != nil {
		t.Errorf("new version: %v", err)
	}
	if err := c.VerifyBundle("b"); err != nil {
		t.Errorf("VerifyBundle: %v", err)
	}
}

// A previous version whose copy of a file was damaged (here: truncated) is
// not trusted: the file is fetched instead of reused.
func TestSyncDoesNotReuseDamagedFiles(t *testing.T) {
	reg := newRegistry(t)
	reg.publish("b", map[string]string{"same.txt": "same", "x.txt": "1"})
	c := openCache(t)
	v1, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(v1.Dir, "same.txt")
	os.Chmod(damaged, 0o644)
	if err := os.WriteFile(damaged, []byte("sam"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg.publish("b", map[string]string{"same.txt": "same", "x.txt": "2"})
	v2, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"same.txt", "x.txt"}, sorted(v2.Fetched)); d != "" {
		t.Errorf("fetched (-want +got):\n%s", d)
	}
	var ce *cache.CorruptError
	if err := c.Verify(v1.Manifest); !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Path != "same.txt" {
		t.Errorf("Verify of the damaged version = %v", err)
	}
}

// TestSyncRejectsWrongBytesAndLeavesNothing serves b.txt wrong: longer,
// shorter, or as long but different, for a file read whole (smaller than
// the copy buffer) and for one written as it streams in.
func TestSyncRejectsWrongBytesAndLeavesNothing(t *testing.T) {
	large := strings.Repeat("large file ", 20_000) // over filehash.BufferSize
	for _, tc := range []struct{ name, content, served string }{
		{"small/longer", "beta", "tampered"},
		{"small/shorter", "beta", "bet"},
		{"small/same size", "beta", "BETA"},
		{"small/empty body", "beta", ""},
		{"large/longer", large, large + "!"},
		{"large/shorter", large, large[:len(large)-1]},
		{"large/same size", large, "L" + large[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := newRegistry(t)
			reg.publish("b", map[string]string{"a.txt": "alpha", "b.txt": tc.content})
			var calls int
			var mu sync.Mutex
			reg.setWrap(func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Query().Get("path") != "b.txt" {
					return false
				}
				mu.Lock()
				calls++
				mu.Unlock()
				io.WriteString(w, tc.served)
				return true
			})
			c := openCache(t)
			_, err := c.Sync(context.Background(), reg.client(), "b", quick)
			var se *cache.SyncError
			if !errors.As(err, &se) || se.Code != bundle.CodeHashMismatch || se.Path != "b.txt" || se.State != cache.StateFetching {
				t.Fatalf("Sync = %v, want hash_mismatch on b.txt", err)
			}
			if calls != cache.DefaultAttempts {
				t.Errorf("b.txt fetched %d times, want %d attempts", calls, cache.DefaultAttempts)
			}
			if e := entries(t, c.Root()); len(e) != 0 {
				t.Errorf("a failed sync left %v in the cache", e)
			}
		})
	}
}

func TestSyncPersistentFetchFailure(t *testing.T) {
	reg := newRegistry(t)
	reg.publish("b", map[string]string{"a.txt": "alpha", "b.txt": "beta"})
	reg.setWrap(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("path") == "b.txt" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	c := openCache(t)
	_, err := c.Sync(context.Background(), reg.client(), "b", quick)
	if !errors.Is(err, bundle.CodeFetchFailed) || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "b.txt") {
		t.Fatalf("Sync = %v, want fetch_failed naming the file and the status", err)
	}
	if e := entries(t, c.Root()); len(e) != 0 {
		t.Errorf("a failed sync left %v in the cache", e)
	}
}

func TestSyncRetriesATransientFailure(t *testing.T) {
	reg := newRegistry(t)
	reg.publish("b", map[string]string{"a.txt": "alpha"})
	failures := 1
	var mu sync.Mutex
	reg.setWrap(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Query().Get("path") == "a.txt" && failures > 0 {
			failures--
			w.WriteHeader(http.StatusInternalServerError)
			return true
		}
		return false
	})
	res, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got, err := res.Sync(context.Background(), reg.client(), "b", quick)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Fetched, []string{"a.txt"}) {
		t.Errorf("fetched %v, want a.txt once", got.Fetched)
	}
}

// manifestJSON builds a manifest with a correct bundleHash around paths
// that may be unsafe.
func manifestJSON(name string, paths ...string) string {
	var files []bundle.File
	var b strings.Builder
	for i, p := range paths {
		files = append(files, bundle.File{Path: p, SHA256: sum(p)})
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"path":"` + p + `","sha256":"` + sum(p) + `","bytes":` + string(rune('0'+len(p)%10)) + `}`)
	}
	return `{"v":1,"name":"` + name + `","bundleHash":"` + bundle.Hash(files) + `","files":[` + b.String() + `]}`
}

func TestSyncRefusesUnsafeAndInvalidManifests(t *testing.T) {
	for _, tc := range []struct {
		manifest string
		code     bundle.ErrorCode
	}{
		{manifestJSON("evil", "../escape.txt"), bundle.CodeUnsafePath},
		{manifestJSON("evil", "/etc/passwd"), bundle.CodeUnsafePath},
		{manifestJSON("evil", "CON.txt"), bundle.CodeUnsafePath},
		{manifestJSON("evil", "Foo.ts", "foo.ts"), bundle.CodeUnsafePath},
		{`{"v":1}`, bundle.CodeInvalidManifest},
		{manifestJSON("other", "a.txt"), bundle.CodeInvalidManifest}, // served under another name
		{strings.Replace(manifestJSON("evil", "a.txt"), `"files"`, `"skills":["../x"],"files"`, 1), bundle.CodeUnsafePath},
	} {
		root := t.TempDir()
		writeTree(t, root, map[string]string{"evil/manifest.json": tc.manifest})
		c := openCache(t)
		res, err := c.Sync(context.Background(), registry.NewDir(root), "evil", cache.SyncOptions{})
		var se *cache.SyncError
		if !errors.As(err, &se) || se.Code != tc.code || se.State != cache.StateFetchManifest {
			t.Errorf("manifest %s: Sync = %v, %v; want %s", tc.manifest, res, err, tc.code)
			continue
		}
		if e := entries(t, c.Root()); len(e) != 0 {
			t.Errorf("manifest %s: the cache holds %v", tc.manifest, e)
		}
	}
}

// treeTamperer is a registry client that, while serving the last file,
// plants an extra file in the staging directory: validating must notice.
type treeTamperer struct {
	registry.Client
	cacheRoot string
}

func (tt treeTamperer) Open(ctx context.Context, name string, f bundle.File) (io.ReadCloser, error) {
	stages, _ := filepath.Glob(filepath.Join(tt.cacheRoot, ".sync-*"))
	for _, s := range stages {
		if fi, err := os.Stat(s); err == nil && fi.IsDir() {
			os.WriteFile(filepath.Join(s, "planted.txt"), []byte("x"), 0o644)
		}
	}
	return tt.Client.Open(ctx, name, f)
}

func TestSyncRejectsATamperedStagingTree(t *testing.T) {
	reg := newRegistry(t)
	reg.publish("b", map[string]string{"a.txt": "alpha"})
	c := openCache(t)
	_, err := c.Sync(context.Background(), treeTamperer{reg.client(), c.Root()}, "b", cache.SyncOptions{})
	var se *cache.SyncError
	if !errors.As(err, &se) || se.Code != bundle.CodeUnsafePath || se.State != cache.StateValidating {
		t.Fatalf("Sync = %v, want unsafe_path from validating", err)
	}
	if e := entries(t, c.Root()); len(e) != 0 {
		t.Errorf("a rejected sync left %v in the cache", e)
	}
}

func TestDegradedStartAndFailFast(t *testing.T) {
	regRoot := t.TempDir()
	src := writeTree(t, t.TempDir(), map[string]string{"a.txt": "1", "b.txt": "2", "c.txt": "3"})
	m, err := registry.Publish(regRoot, "b", src, registry.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := openCache(t)
	first, err := c.Sync(context.Background(), registry.NewDir(regRoot), "b", cache.SyncOptions{})
	if err != nil || len(first.Fetched) != 3 || first.Dir != filepath.Join(c.Root(), m.BundleHash) {
		t.Fatalf("first sync = %+v, %v", first, err)
	}

	// The registry is deleted: degraded start from the cache.
	if err := os.RemoveAll(regRoot); err != nil {
		t.Fatal(err)
	}
	res, err := c.Sync(context.Background(), registry.NewDir(regRoot), "b", cache.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != cache.StatusDegraded || res.BundleHash != m.BundleHash || !errors.Is(res.RegistryErr, bundle.CodeNotFound) {
		t.Errorf("degraded sync = %+v", res)
	}
	if d := cmp.Diff([]cache.SyncState{"fetch_manifest", "use_stale_cache", "ready_degraded"}, res.Trail); d != "" {
		t.Errorf("trail (-want +got):\n%s", d)
	}

	// A pin that differs is refused on the degraded path too.
	_, err = c.Sync(context.Background(), registry.NewDir(regRoot), "b", cache.SyncOptions{PinnedHash: strings.Repeat("a", 64)})
	var pe *cache.PinError
	if !errors.Is(err, bundle.CodeHashMismatch) || !errors.As(err, &pe) || !pe.Degraded {
		t.Errorf("pinned degraded sync = %v, want a hash mismatch", err)
	}

	// An unreachable HTTP registry with the cache: degraded, unreachable.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	httpReg, _ := registry.NewHTTP(closed.URL)
	res, err = c.Sync(context.Background(), httpReg, "b", cache.SyncOptions{})
	if err != nil || res.Status != cache.StatusDegraded || !errors.Is(res.RegistryErr, bundle.CodeUnreachable) {
		t.Errorf("unreachable registry with a cache: %+v, %v", res, err)
	}

	// Without a cached copy: fail fast, naming the registry and the bundle.
	_, err = openCache(t).Sync(context.Background(), httpReg, "b", cache.SyncOptions{})
	var se *cache.SyncError
	if !errors.As(err, &se) || se.Code != bundle.CodeUnreachable || se.State != cache.StateFetchManifest {
		t.Fatalf("no cache: %v", err)
	}
	for _, want := range []string{"registry unreachable and no cached copy", closed.URL, `"b"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// A directory registry without the bundle: not_found.
	if _, err := openCache(t).Sync(context.Background(), registry.NewDir(t.TempDir()), "b", cache.SyncOptions{}); !errors.Is(err, bundle.CodeNotFound) {
		t.Errorf("missing bundle: %v, want not_found", err)
	}
}

func TestPinnedHash(t *testing.T) {
	reg := newRegistry(t)
	m := reg.publish("b", map[string]string{"a.txt": "1"})
	c := openCache(t)
	_, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{PinnedHash: strings.Repeat("0", 64)})
	var pe *cache.PinError
	if !errors.As(err, &pe) || pe.Got != m.BundleHash || !strings.Contains(err.Error(), "hash mismatch") {
		t.Fatalf("Sync = %v, want a pin mismatch", err)
	}
	if e := entries(t, c.Root()); len(e) != 0 {
		t.Errorf("a refused sync left %v", e)
	}
	if _, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{PinnedHash: m.BundleHash}); err != nil {
		t.Errorf("matching pin: %v", err)
	}
}

func TestConcurrentSyncsOfOneVersion(t *testing.T) {
	reg := newRegistry(t)
	files := map[string]string{}
	for i := range 40 {
		files[filepath.ToSlash(filepath.Join("d", string(rune('a'+i%26)), strings.Repeat("x", i+1)))] = strings.Repeat("y", i)
	}
	m := reg.publish("b", files)
	root := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			c, err := cache.Open(root)
			if err == nil {
				_, err = c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	c, _ := cache.Open(root)
	if err := c.Verify(m); err != nil {
		t.Error(err)
	}
	if e := entries(t, root); !slices.Equal(sorted(e), []string{m.BundleHash, "by-name"}) {
		t.Errorf("cache root holds %v", e)
	}
}

func TestCancelledSyncLeavesNothing(t *testing.T) {
	reg := newRegistry(t)
	reg.publish("b", map[string]string{"a.txt": "1", "b.txt": "2"})
	ctx, cancel := context.WithCancel(context.Background())
	reg.setWrap(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("path") != "" {
			cancel() // the client goes away while files are being fetched
			<-r.Context().Done()
			return true
		}
		return false
	})
	c := openCache(t)
	_, err := c.Sync(ctx, reg.client(), "b", cache.SyncOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync = %v, want context.Canceled", err)
	}
	if e := entries(t, c.Root()); len(e) != 0 {
		t.Errorf("a cancelled sync left %v", e)
	}
}

func TestVerifyReportsEveryProblem(t *testing.T) {
	reg := newRegistry(t)
	m := reg.publish("b", map[string]string{"a.txt": "alpha", "b.txt": "beta", "c.txt": "gamma"})
	c := openCache(t)
	res, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(res.Dir, "a.txt"), 0o644)
	os.WriteFile(filepath.Join(res.Dir, "a.txt"), []byte("ALPHA"), 0o644)
	os.Remove(filepath.Join(res.Dir, "b.txt"))
	os.WriteFile(filepath.Join(res.Dir, "extra.txt"), nil, 0o644)
	err = c.Verify(m)
	var ce *cache.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("Verify = %v", err)
	}
	want := []cache.Problem{
		{Path: "a.txt", Reason: "content does not match its hash"},
		{Path: "b.txt", Reason: "missing"},
		{Path: "extra.txt", Reason: "not in the manifest"},
	}
	if d := cmp.Diff(want, ce.Problems); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
	other := *m
	other.BundleHash = strings.Repeat("f", 64)
	if err := c.Verify(&other); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Verify of an uncached version = %v", err)
	}
}

func TestPointerIsReadableInBothLayouts(t *testing.T) {
	reg := newRegistry(t)
	m := reg.publish("b", map[string]string{"a.txt": "1"})
	c := openCache(t)
	if _, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := c.Pointer("b")
	if err != nil || p.BundleHash != m.BundleHash {
		t.Fatalf("Pointer = %+v, %v", p, err)
	}
	// Another writer's layout: keys swapped, indented.
	path := filepath.Join(c.Root(), "by-name", "b.json")
	os.WriteFile(path, []byte("{\n \"manifest\": "+string(m.Encode())+",\n \"bundleHash\": \""+m.BundleHash+"\"\n}\n"), 0o644)
	if p, err := c.Pointer("b"); err != nil || p.BundleHash != m.BundleHash {
		t.Errorf("Pointer of another layout = %+v, %v", p, err)
	}
	os.WriteFile(path, []byte(`{"bundleHash":"`+strings.Repeat("0", 64)+`","manifest":`+compactJSON(m)+`}`), 0o644)
	if _, err := c.Pointer("b"); !errors.Is(err, bundle.CodeInvalidManifest) {
		t.Errorf("pointer with the wrong hash: %v", err)
	}
	if _, err := c.Pointer("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing pointer: %v", err)
	}
}

// compactJSON is the manifest as a registry serves it.
func compactJSON(m *bundle.Manifest) string {
	b, _ := m.MarshalJSON()
	return string(b)
}
