package cache_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/registry"
)

// A sync fails fast, without leaving a half-written version, from each
// step that can fail: the cases below are real failures (a registry that
// hangs until the caller gives up, a cache whose pointer cannot be
// written, a manifest a client made up, a staged tree that vanished).

func failedFrom(t *testing.T, err error, state cache.SyncState) *cache.SyncError {
	t.Helper()
	var se *cache.SyncError
	if !errors.As(err, &se) || se.State != state {
		t.Fatalf("Sync = %v, want a *SyncError from %s", err, state)
	}
	return se
}

func TestSyncGivenUpWhileTheManifestHangsFails(t *testing.T) {
	reg := newRegistry(t)
	reg.publish("b", map[string]string{"a.txt": "1"})
	ctx, cancel := context.WithCancel(context.Background())
	reg.setWrap(func(w http.ResponseWriter, r *http.Request) bool {
		cancel() // the caller gives up while the registry hangs
		<-r.Context().Done()
		return true
	})
	c := openCache(t)
	_, err := c.Sync(ctx, reg.client(), "b", cache.SyncOptions{})
	failedFrom(t, err, cache.StateFetchManifest)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Sync = %v, want context.Canceled", err)
	}
	if e := entries(t, c.Root()); len(e) != 0 {
		t.Errorf("a cancelled sync left %v", e)
	}
}

// blockPointer puts a non-empty directory where name's pointer goes, so
// that no pointer can be renamed into place.
func blockPointer(t *testing.T, c *cache.Cache, name string) {
	t.Helper()
	p := filepath.Join(c.Root(), cache.PointerDir, name+".json")
	os.Remove(p)
	if err := os.MkdirAll(filepath.Join(p, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestSyncThatCannotWriteThePointerFails(t *testing.T) {
	t.Run("cache hit", func(t *testing.T) {
		reg := newRegistry(t)
		reg.publish("b", map[string]string{"a.txt": "1"})
		c := openCache(t)
		if _, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{}); err != nil {
			t.Fatal(err)
		}
		blockPointer(t, c, "b")
		_, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{})
		if se := failedFrom(t, err, cache.StateCacheCheck); se.Code != cache.CodeCacheFailed {
			t.Errorf("code %s, want %s", se.Code, cache.CodeCacheFailed)
		}
	})
	t.Run("new version", func(t *testing.T) {
		reg := newRegistry(t)
		reg.publish("b", map[string]string{"a.txt": "1"})
		c := openCache(t)
		blockPointer(t, c, "b")
		_, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{})
		if se := failedFrom(t, err, cache.StateSwapping); se.Code != cache.CodeCacheFailed {
			t.Errorf("code %s, want %s", se.Code, cache.CodeCacheFailed)
		}
	})
}

// madeUpManifest is a registry client that hands over a manifest of its
// own making, with a path that escapes the bundle.
type madeUpManifest struct{ registry.Client }

func (m madeUpManifest) Manifest(ctx context.Context, name string) (*bundle.Manifest, error) {
	man, err := m.Client.Manifest(ctx, name)
	if err != nil {
		return nil, err
	}
	man.Files[0].Path = "../escaped.txt"
	return man, nil
}

func TestSyncOfAMadeUpUnsafeManifestFails(t *testing.T) {
	reg := newRegistry(t)
	reg.publish("b", map[string]string{"a.txt": "1"})
	c := openCache(t)
	_, err := c.Sync(context.Background(), madeUpManifest{reg.client()}, "b", cache.SyncOptions{})
	if se := failedFrom(t, err, cache.StateDiffing); se.Code != bundle.CodeUnsafePath {
		t.Errorf("code %s, want %s", se.Code, bundle.CodeUnsafePath)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(c.Root()), "escaped.txt")); !os.IsNotExist(err) {
		t.Errorf("the escaping file was written: %v", err)
	}
}

// treeRemover is a registry client whose file bodies, once read and
// closed, remove the staging directories: the staged tree vanishes
// between the fetch and its check.
type treeRemover struct {
	registry.Client
	cacheRoot string
}

func (tr treeRemover) Open(ctx context.Context, name string, f bundle.File) (io.ReadCloser, error) {
	rc, err := tr.Client.Open(ctx, name, f)
	if err != nil {
		return nil, err
	}
	return removeOnClose{rc, tr.cacheRoot}, nil
}

type removeOnClose struct {
	io.ReadCloser
	cacheRoot string
}

func (r removeOnClose) Close() error {
	stages, _ := filepath.Glob(filepath.Join(r.cacheRoot, ".sync-*"))
	for _, s := range stages {
		if fi, err := os.Stat(s); err == nil && fi.IsDir() {
			os.RemoveAll(s)
		}
	}
	return r.ReadCloser.Close()
}

func TestSyncWhoseStagedTreeVanishedFails(t *testing.T) {
	reg := newRegistry(t)
	reg.publish("b", map[string]string{"a.txt": "1"})
	c := openCache(t)
	_, err := c.Sync(context.Background(), treeRemover{reg.client(), c.Root()}, "b", cache.SyncOptions{})
	if se := failedFrom(t, err, cache.StateValidating); se.Code != cache.CodeCacheFailed {
		t.Errorf("code %s, want %s", se.Code, cache.CodeCacheFailed)
	}
	if _, err := os.Stat(c.Dir(reg.publish("b", map[string]string{"a.txt": "1"}).BundleHash)); !os.IsNotExist(err) {
		t.Errorf("a failed sync installed the version: %v", err)
	}
}
