package cache_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/registry"
)

// TestSyncSurvivesKill9 runs real syncs in child processes and kills them
// with SIGKILL at seeded random moments (mid-fetch, mid-write, during the
// swap, after it), then checks that the cache never holds a partial
// version or a dangling pointer, and that the next sync recovers and
// cleans up. Set PIFLEET_CRASH_SEED to replay a run.
func TestSyncSurvivesKill9(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("kill -9 semantics and file locks are Unix features")
	}
	if testing.Short() {
		t.Skip("spawns 30 processes")
	}
	seed := uint64(20260601)
	if s := os.Getenv("PIFLEET_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	reg := newRegistry(t)
	// Five versions that share most files, so syncs reuse as well as fetch;
	// a few large files make kills land in the middle of writes.
	versions := make(map[string]*bundle.Manifest)
	sources := make(map[string]string)
	var order []*bundle.Manifest
	for v := range 5 {
		files := map[string]string{}
		for i := range 150 {
			content := fmt.Sprintf("file %d\n", i)
			if i%(v+3) == 0 {
				content += fmt.Sprintf("version %d\n", v)
			}
			files[fmt.Sprintf("d%d/f%03d.txt", i%7, i)] = content
		}
		for i := range 3 {
			files[fmt.Sprintf("big/%d.bin", i)] = strings.Repeat(fmt.Sprintf("%d-%d|", v*(i%2), i), 300_000)
		}
		src := writeTree(t, t.TempDir(), files)
		m, err := registry.Publish(reg.root, "b", src, registry.PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions[m.BundleHash], sources[m.BundleHash] = m, src
		order = append(order, m)
	}
	root := t.TempDir()
	c, err := cache.Open(root)
	if err != nil {
		t.Fatal(err)
	}

	killedIn := map[string]int{}
	const iterations = 30
	for it := range iterations {
		m := order[rng.IntN(len(order))]
		// Most syncs should do real work: forget the version half of the
		// time, unless the pointer names it (cache hits still happen, and
		// exercise the pointer update).
		if p, err := c.Pointer("b"); rng.IntN(2) == 0 && (err != nil || p.BundleHash != m.BundleHash) {
			if err := os.RemoveAll(c.Dir(m.BundleHash)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := registry.Publish(reg.root, "b", sources[m.BundleHash], registry.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
		// Kill after a random number of progress lines (past the end, the
		// sync completes), or right as a late step begins.
		kill := killPoint{lines: 1 + rng.IntN(len(m.Files)*5/4)}
		if rng.IntN(4) == 0 {
			kill = killPoint{state: []string{"validating", "swapping", "diffing"}[rng.IntN(3)]}
		}
		last := runChildAndKill(t, root, reg.srv.URL, kill)
		killedIn[last]++
		checkInvariants(t, c, versions, fmt.Sprintf("iteration %d (kill at %+v)", it, kill))
	}
	t.Logf("last state reported before the kill: %v", killedIn)
	if killedIn["done"] > iterations*2/3 {
		t.Errorf("%d of %d syncs finished before the kill; the test is not testing much", killedIn["done"], iterations)
	}

	final, err := c.Sync(context.Background(), reg.client(), "b", cache.SyncOptions{})
	if err != nil {
		t.Fatalf("sync after the kills: %v", err)
	}
	if err := c.Verify(final.Manifest); err != nil {
		t.Error(err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, ".sync-*"))
	if len(leftovers) > 0 {
		t.Errorf("staging leftovers after a recovering sync: %v", leftovers)
	}
}

// killPoint says when to kill a child: after it printed lines progress
// lines, or as soon as it reports state.
type killPoint struct {
	lines int
	state string
}

// runChildAndKill starts a child sync and SIGKILLs it at the kill point.
// It returns the last state the child reported, or "done" when it
// finished first.
func runChildAndKill(t *testing.T, root, url string, kill killPoint) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=sync", "CHILD_CACHE="+root, "CHILD_REGISTRY="+url, "CHILD_BUNDLE=b")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	lines, last := 0, "none"
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "error") {
			t.Errorf("child sync failed: %s", line)
		}
		if line == "done" {
			last = line
			break
		}
		last, _, _ = strings.Cut(line, " ")
		lines++
		if lines == kill.lines || last == kill.state {
			cmd.Process.Kill() // SIGKILL
			break
		}
	}
	cmd.Wait()
	return last
}

// checkInvariants: every version directory in the cache is complete and
// intact, and the pointer, if any, names an intact version.
func checkInvariants(t *testing.T, c *cache.Cache, versions map[string]*bundle.Manifest, when string) {
	t.Helper()
	des, err := os.ReadDir(c.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range des {
		name := d.Name()
		switch {
		case name == cache.PointerDir, strings.HasPrefix(name, ".sync-"):
		case versions[name] != nil:
			if err := c.Verify(versions[name]); err != nil {
				t.Errorf("%s: %v", when, err)
			}
		default:
			t.Errorf("%s: unexpected cache entry %q", when, name)
		}
	}
	p, err := c.Pointer("b")
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Errorf("%s: damaged pointer: %v", when, err)
		return
	}
	if err := c.Verify(p.Manifest); err != nil {
		t.Errorf("%s: the pointer names a version that is not intact: %v", when, err)
	}
}
