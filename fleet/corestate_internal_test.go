package fleet

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
)

// The core's indexes agree after an instance id is registered again
// under another agent, and a task is taken out only by the task itself.
func TestCoreStateIndexes(t *testing.T) {
	c := newCoreState()
	i1a := &instance{id: "i-1", agent: "a"}
	i2a := &instance{id: "i-2", agent: "a"}
	c.addInstance(i1a)
	c.addInstance(i2a)
	i1b := &instance{id: "i-1", agent: "b"}
	c.addInstance(i1b)
	if got := c.instance("i-1"); got != i1b {
		t.Fatalf("instance(i-1) = %+v, want the one of b", got)
	}
	if a := slices.Collect(c.agentInstances("a")); len(a) != 1 || a[0] != i2a {
		t.Errorf("a's instances = %v, want only i-2", a)
	}
	if b := slices.Collect(c.agentInstances("b")); len(b) != 1 || b[0] != i1b {
		t.Errorf("b's instances = %v, want only i-1", b)
	}
	if n := len(maps.Collect(c.allInstances())); n != 2 {
		t.Errorf("%d instances, want 2", n)
	}
	if c.instance("i-3") != nil || slices.Collect(c.agentInstances("c")) != nil {
		t.Error("an unknown id or agent found something")
	}

	t1 := &task{rec: serverstore.Task{TaskID: "t-1"}}
	c.addTask(t1)
	c.removeTask(&task{rec: serverstore.Task{TaskID: "t-1"}}) // another task of that id: not it
	if c.task("t-1") != t1 || c.taskCount() != 1 {
		t.Fatalf("a task of the same id removed t-1")
	}
	c.removeTask(t1)
	if c.task("t-1") != nil || c.taskCount() != 0 || len(slices.Collect(c.allTasks())) != 0 {
		t.Fatalf("t-1 still there after its removal")
	}
}

// A catch-up mark is pending from its start to its end, and remembers
// whether it was asked to run once more; spawn intents can be dropped
// while they are listed.
func TestCoreStateCatchUpsAndSpawnIntents(t *testing.T) {
	c := newCoreState()
	if _, pending := c.catchUp("i-1"); pending {
		t.Fatal("a catch-up pending before any started")
	}
	c.setCatchUp("i-1", false)
	if again, pending := c.catchUp("i-1"); !pending || again {
		t.Fatalf("after the start: again %v pending %v, want false true", again, pending)
	}
	c.setCatchUp("i-1", true)
	if again, _ := c.catchUp("i-1"); !again {
		t.Fatal("the ask to run once more was lost")
	}
	c.endCatchUp("i-1")
	if _, pending := c.catchUp("i-1"); pending {
		t.Fatal("a catch-up pending after its end")
	}

	c.addSpawnIntent(serverstore.SpawnIntent{SpawnID: "s-1", Machine: "a"})
	c.addSpawnIntent(serverstore.SpawnIntent{SpawnID: "s-2", Machine: "b"})
	for id, in := range c.allSpawnIntents() {
		if in.Machine == "a" {
			c.dropSpawnIntent(id)
		}
	}
	if _, ok := c.spawnIntent("s-1"); ok {
		t.Error("s-1 still there after it was dropped")
	}
	if in, ok := c.spawnIntent("s-2"); !ok || in.Machine != "b" {
		t.Errorf("s-2 = %+v %v, want b's", in, ok)
	}
}

// The reads of the instances and tasks are answered while another
// goroutine holds the fleet lock for a connection's change (lockAgents):
// they take the core's lock alone.
func TestCoreReadsDoNotWaitForAConnectionChange(t *testing.T) {
	f, _ := pipedFleet(t, 1, 1)
	defer f.Close()
	whileLockHeld(t, f, f.mu.lockAgents, "a read of the core", func() error {
		st := f.Status(t.Context())
		if len(st.Agents) != 1 || len(st.Instances) != 1 || st.Instances[0].State != StateIdle {
			return fmt.Errorf("status: agents %+v, instances %+v", st.Agents, st.Instances)
		}
		i, err := f.Instance("i-00000-00")
		if err != nil {
			return err
		}
		if s := i.State(); s != StateIdle {
			return fmt.Errorf("State = %s, want idle", s)
		}
		if _, err := f.Task("t-none"); !errors.Is(err, ErrUnknownTask) {
			return fmt.Errorf("Task(t-none) = %v, want ErrUnknownTask", err)
		}
		_ = f.Tasks()
		_ = f.ListSessions(SessionFilter{})
		return nil
	})
}

// Status and the getters read the core while connection losses change
// every instance (under -race: whatever they read is written under the
// core's lock).
func TestCoreReadsWhileInstancesChange(t *testing.T) {
	f, peers := pipedFleet(t, 4, 5)
	defer f.Close()
	sub := f.Subscribe(64)
	defer sub.Close()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		inst, err := f.Instance("i-00001-02")
		if err != nil {
			t.Error(err)
			return
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			f.Status(t.Context())
			_ = inst.State()
			_ = f.Tasks()
		}
	}()
	for _, p := range peers {
		_ = p.Close()
	}
	for lost := 0; lost < len(peers); {
		if c := <-sub.C; c.Kind == ChangeAgentState && c.To == string(transport.StateLost) {
			lost++
		}
	}
	close(stop)
	<-stopped
	for _, is := range f.Status(t.Context()).Instances {
		if is.State != StateUnreachable {
			t.Errorf("instance %s is %s after its connection dropped, want unreachable", is.InstanceID, is.State)
		}
	}
}
