//go:build linux

package agent

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/transport"
)

// Issue #16, defect 1 on a full disk: a spawn whose durable records
// cannot be written fails with spawn_failed, and no worker process is
// started (before, the worker started and its handle was lost, so a
// restarted agent could never find it). Once space returns, spawns work.
func TestSpawnOnAFullDiskFailsCleanly(t *testing.T) {
	disk := e2ekit.SmallDisk(t, "8m")
	h := newHarness(t, hopts{stateDir: filepath.Join(disk, "state"), mod: func(c *Config) {
		c.CacheDir = filepath.Join(shortDir(t, "pc"), "bundles") // the bundles fit elsewhere
	}})
	c := h.dial(t)
	c.hello()
	before := liveDescendants()
	free := e2ekit.FillDisk(t, disk)

	switch f := c.spawn("s1", h.cwd, "default", nil).(type) {
	case *transport.SpawnErrorFrame:
		if f.Code != CodeSpawnFailed {
			t.Errorf("spawn on a full disk: %s: %s, want %s", f.Code, f.Message, CodeSpawnFailed)
		}
		t.Logf("refused: %s", f.Message)
	default:
		t.Fatalf("spawn on a full disk answered %s, want spawn_error", f.FrameType())
	}
	if after := liveDescendants(); !slices.Equal(before, after) {
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

// Issue #16, defect 3: with the agent's disk full when a task settled, its
// task_done could not be stored and was dropped ("it is lost"): the task
// was already cleared in memory and nothing tried again. Now the report is
// kept, said so in the log and in Health, never sent before it is stored,
// and written once the disk has room again; it is then delivered once.
func TestTaskDoneOnAFullDiskIsStoredWhenSpaceReturns(t *testing.T) {
	disk := e2ekit.SmallDisk(t, "8m")
	unstored := make(chan string, 4)
	h := newHarness(t, hopts{stateDir: filepath.Join(disk, "state"), env: []string{"PIFLEET_FAUX_CHUNK=1000000"}, mod: func(c *Config) {
		c.CacheDir = filepath.Join(shortDir(t, "pc"), "bundles")
	}})
	h.a.hooks.taskDoneUnstored = func(id string) { unstored <- id }
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s1", h.cwd, "default", nil)
	fifo := mkfifo(t, h.cwd, "gate")
	// The run's last message is ~200 KB (the tool's first output line), so
	// that its task_done needs pages the database file does not have.
	c.rpc(inst.InstanceID, "t-full", prompt("p", `bash: cat gate >/dev/null; head -c 200000 /dev/zero | tr '\0' x`))
	c.nextEvent(inst.InstanceID, typeIs("tool_execution_start"))
	free := e2ekit.FillDisk(t, disk)
	release(t, fifo)

	select {
	case id := <-unstored:
		if id != "t-full" {
			t.Fatalf("unstored task %q", id)
		}
	case <-time.After(waitLimit):
		t.Fatal("the task_done was stored on a full disk (the test cannot fill the database)")
	}
	if hl := h.a.Health(); hl.UnstoredTaskDones != 1 || !strings.Contains(hl.StoreError, "no space") {
		t.Errorf("Health on a full disk: %+v", hl)
	}
	c.nextEvent(inst.InstanceID, typeIs("agent_settled"))
	c.roundTrip("l1")
	for _, f := range c.seen {
		if td, ok := f.(*transport.TaskDoneFrame); ok {
			t.Fatalf("task_done sent before it was stored: %+v", td.TaskID)
		}
	}

	free()
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	if td.TaskID != "t-full" || td.Status != transport.TaskSettled || len(td.LastAssistantMessage) < 200000 {
		t.Fatalf("task_done once space returned: %s %s (%d bytes of last message)", td.TaskID, td.Status, len(td.LastAssistantMessage))
	}
	c.ack(td)
	c.roundTrip("l2")
	if hl := h.a.Health(); hl.UnstoredTaskDones != 0 || hl.StoreError != "" {
		t.Errorf("Health once stored: %+v", hl)
	}
	for _, f := range c.seen {
		if x, ok := f.(*transport.TaskDoneFrame); ok && x != td {
			t.Errorf("task_done delivered twice: %+v", x.TaskID)
		}
	}
}
