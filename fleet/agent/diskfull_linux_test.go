//go:build linux

package agent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"example.com/pifleet/transport"
)

// smallDisk mounts a tmpfs of size bytes for the test (we run as root in
// CI); the test is skipped, saying why, where mounting is not permitted.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pd")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		os.Remove(dir)
		t.Skipf("a full disk needs a small tmpfs, and mounting one is not permitted here: %v", err)
	}
	t.Cleanup(func() {
		syscall.Unmount(dir, syscall.MNT_DETACH)
		os.Remove(dir)
	})
	return dir
}

// fillDisk fills the file system of dir to the last byte and returns the
// function that frees the space again.
func fillDisk(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			chunk = chunk[:len(chunk)/2] // fill the last partial pages too
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// workerProcesses are the live processes below this test process.
func workerProcesses(t *testing.T) []int {
	var pids []int
	for _, p := range descendants(processes(t), os.Getpid()) {
		if p.state != 'Z' {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// Issue #16, defect 1 on a full disk: a spawn whose durable records
// cannot be written fails with spawn_failed, and no worker process is
// started (before, the worker started and its handle was lost, so a
// restarted agent could never find it). Once space returns, spawns work.
func TestSpawnOnAFullDiskFailsCleanly(t *testing.T) {
	disk := smallDisk(t, "8m")
	h := newHarness(t, hopts{stateDir: filepath.Join(disk, "state"), mod: func(c *Config) {
		c.CacheDir = filepath.Join(shortDir(t, "pc"), "bundles") // the bundles fit elsewhere
	}})
	c := h.dial(t)
	c.hello()
	before := workerProcesses(t)
	free := fillDisk(t, disk)

	switch f := c.spawn("s1", h.cwd, "default", nil).(type) {
	case *transport.SpawnErrorFrame:
		if f.Code != CodeSpawnFailed {
			t.Errorf("spawn on a full disk: %s: %s, want %s", f.Code, f.Message, CodeSpawnFailed)
		}
		t.Logf("refused: %s", f.Message)
	default:
		t.Fatalf("spawn on a full disk answered %s, want spawn_error", f.FrameType())
	}
	if after := workerProcesses(t); !slices.Equal(before, after) {
		t.Errorf("processes before the refused spawn %v, after %v: a worker was started", before, after)
	}
	if l := c.roundTrip("l").Instances; len(l) != 0 {
		t.Errorf("instances after the refused spawn: %+v", l)
	}

	free()
	inst := c.mustSpawn("s2", h.cwd, "default", nil)
	if inst.State != transport.InstanceRunning {
		t.Errorf("spawn once space returned: %+v", inst)
	}
}
