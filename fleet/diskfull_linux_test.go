//go:build linux

package fleet_test

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/transport"
)

// TestSubmitOnAFullServerDiskFailsAndLeavesNoPhantom (#16 defect 4):
// when the task record cannot be written, Submit returns the write error
// and sends nothing: no phantom task that the worker runs and the server
// cannot review. A task_done for a task the server does not know writes
// no blank record. Once space returns, Submit works.
func TestSubmitOnAFullServerDiskFailsAndLeavesNoPhantom(t *testing.T) {
	disk := e2ekit.SmallDisk(t, "4m")
	peer := newTestAgentPeer(t, "box", true)
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, filepath.Join(disk, "state"), reg, []fleet.Agent{{Name: "box", Addresses: []string{peer.Addr()}}})
	tf.waitAgent(t, "box", transport.StateEstablished)
	inst := spawn(t, tf, "box")
	drainFrames(peer)

	free := e2ekit.FillDisk(t, disk)
	// A prompt as large as a task record keeps: its pages cannot come
	// from the store's free list.
	_, err := inst.Submit(t.Context(), strings.Repeat("x", serverstore.MaxTextBytes), fleet.PromptOptions{})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Submit on a full disk: %v, want the write's ENOSPC", err)
	}
	if tasks := tf.Tasks(); len(tasks) != 0 {
		t.Errorf("a failed Submit left tasks: %+v", tasks)
	}
	for _, fr := range drainFrames(peer) {
		if rpc, ok := fr.(*transport.RPCFrame); ok && rpc.TaskID != "" {
			t.Errorf("the prompt of a task never recorded was sent: %+v", rpc)
		}
	}
	if got := inst.State(); got != fleet.StateIdle {
		t.Errorf("instance %s, want idle", got)
	}

	free()
	// A task_done for a task nobody submitted (here: the phantom of old)
	// is recorded and acked, and creates no task.
	peer.send(peer.conn(), &transport.TaskDoneFrame{TaskID: "t-phantom", InstanceID: inst.ID(), Seq: 1,
		Status: transport.TaskSettled, Summary: "done"})
	if r := tf.report(t); r.TaskID != "t-phantom" {
		t.Fatalf("report %+v", r)
	}
	if tasks := tf.Tasks(); len(tasks) != 0 {
		t.Errorf("a task_done for an unknown task made a record: %+v", tasks)
	}
	if got := inst.State(); got != fleet.StateIdle {
		t.Errorf("instance %s after a stray task_done, want idle", got)
	}
	task, _ := submitAndFinish(t, tf, inst, "now it fits")
	if info := task.Info(); info.InstanceID != inst.ID() || info.State != fleet.TaskAwaitingReview {
		t.Errorf("task after space returned: %+v", info)
	}
}
