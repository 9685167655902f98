//go:build unix

package agent

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/transport"
)

// tsClient speaks to the agent the way the TypeScript server does: it
// writes the reference's frames byte for byte and reads the answers as
// plain JSON objects, so that a field Go would drop or rename shows.
type tsClient struct {
	t     *testing.T
	nc    net.Conn
	lines chan map[string]any
}

func dialTS(t *testing.T, h *harness) *tsClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", h.a.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &tsClient{t: t, nc: nc, lines: make(chan map[string]any, 4096)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(nc)
		sc.Buffer(make([]byte, 0, 64<<10), 2<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("agent sent a line that is not JSON: %q", sc.Text())
				return
			}
			if m["type"] != "heartbeat" {
				c.lines <- m
			}
		}
	}()
	return c
}

func (c *tsClient) write(line string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(line + "\n")); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next frame of type typ (others are skipped).
func (c *tsClient) next(typ string) map[string]any {
	c.t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case m, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("connection closed waiting for %s", typ)
			}
			if m["type"] == typ {
				return m
			}
		case <-timeout:
			c.t.Fatalf("no %s", typ)
		}
	}
}

// has fails unless m has every key (null values count: the TS schemas
// require them present).
func has(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q: %v", m["type"], k, m)
		}
	}
}

func lacks(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; ok {
			t.Errorf("%s has %q: %v", m["type"], k, m)
		}
	}
}

// tsServer lets the TypeScript server of these tests (tsClient, which
// proves no key) in.
func tsServer(c *Config) { c.AllowV1Server = true }

func execOn(mod func(*Config)) func(*Config) {
	return func(c *Config) {
		tsServer(c)
		c.ExecPolicy = ExecFull
		c.ExecShell = []string{"/bin/bash", "-c"} // no login profile: see execplane's tests
		if mod != nil {
			mod(c)
		}
	}
}

// Checklist 102: off by default: no capability, exec_disabled with the
// request's id, an empty (not null) list, and no audit log.
func TestExecOffByDefault(t *testing.T) {
	h := newHarness(t, hopts{mod: tsServer})
	c := dialTS(t, h)
	hello := c.next("hello")
	if caps, _ := hello["capabilities"].([]any); slices.Contains(caps, any("exec-v1")) {
		t.Errorf("hello announces exec-v1: %v", caps)
	}
	c.write(`{"v":1,"type":"exec_start","id":"r-000000000001","mode":"argv","cwd":"/","executable":"ls"}`)
	e := c.next("error")
	if e["code"] != "exec_disabled" || e["id"] != "r-000000000001" {
		t.Errorf("exec_start: %v", e)
	}
	c.write(`{"v":1,"type":"exec_list","id":"r-000000000002"}`)
	l := c.next("exec_instances")
	if list, ok := l["executions"].([]any); !ok || len(list) != 0 {
		t.Errorf("exec_instances: %v", l)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.StateDir, "exec-audit.jsonl")); !os.IsNotExist(err) {
		t.Errorf("audit log exists with exec off: %v", err)
	}
}

// Checklist 104 over the wire, as the TypeScript server drives it: hello
// announces exec-v1; exec_started echoes the id, then output (no id) and
// the exit with every required key; exec_list shows it exited; exec_abort
// ends a running command with aborted:true.
func TestExecDrivenLikeTypeScriptServer(t *testing.T) {
	h := newHarness(t, hopts{mod: execOn(nil)})
	c := dialTS(t, h)
	hello := c.next("hello")
	if caps, _ := hello["capabilities"].([]any); !slices.Contains(caps, any("exec-v1")) {
		t.Fatalf("hello lacks exec-v1: %v", caps)
	}
	dir := t.TempDir()
	start, _ := json.Marshal(map[string]any{"v": 1, "type": "exec_start", "id": "r-0123456789ab", "mode": "argv",
		"cwd": dir, "executable": "/bin/sh", "args": []string{"-c", `printf '%s|%s' "$1" "$2"; printf err >&2; exit 3`, "sh", "a b", "$HOME"}})
	c.write(string(start))
	started := c.next("exec_started")
	if started["id"] != "r-0123456789ab" {
		t.Errorf("exec_started id: %v", started)
	}
	has(t, started, "execId", "startedAt")
	id, _ := started["execId"].(string)
	if len(id) != 14 || !strings.HasPrefix(id, "x-") {
		t.Errorf("execId %q", id)
	}
	var out, errOut strings.Builder
	var seqs []float64
	var exit map[string]any
	for exit == nil {
		select {
		case m := <-c.lines:
			switch m["type"] {
			case "exec_output":
				lacks(t, m, "id")
				has(t, m, "execId", "seq", "stream", "base64")
				b, err := base64.StdEncoding.DecodeString(m["base64"].(string))
				if err != nil {
					t.Fatal(err)
				}
				if m["stream"] == "stdout" {
					out.Write(b)
				} else {
					errOut.Write(b)
				}
				seqs = append(seqs, m["seq"].(float64))
			case "exec_exit":
				exit = m
			}
		case <-time.After(waitLimit):
			t.Fatal("no exec_exit")
		}
	}
	if out.String() != "a b|$HOME" || errOut.String() != "err" {
		t.Errorf("stdout %q stderr %q", out.String(), errOut.String())
	}
	for i, s := range seqs {
		if s != float64(i) {
			t.Errorf("seqs %v", seqs)
		}
	}
	lacks(t, exit, "id")
	has(t, exit, "execId", "exitCode", "signal", "timedOut", "aborted", "durationMs")
	if exit["exitCode"] != 3.0 || exit["signal"] != nil || exit["timedOut"] != false || exit["aborted"] != false {
		t.Errorf("exec_exit %v", exit)
	}

	c.write(`{"v":1,"type":"exec_list","id":"r-000000000003"}`)
	list := c.next("exec_instances")["executions"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["state"] != "exited" || list[0].(map[string]any)["execId"] != id {
		t.Errorf("exec_instances %v", list)
	}
	has(t, list[0].(map[string]any), "execId", "mode", "cwd", "state", "startedAt", "finishedAt", "exitCode")

	// A long command, aborted.
	c.write(`{"v":1,"type":"exec_start","id":"r-000000000004","mode":"shell","cwd":"` + dir + `","command":"echo go; exec sleep 300","timeoutSeconds":600}`)
	long := c.next("exec_started")["execId"].(string)
	c.next("exec_output")
	c.write(`{"v":1,"type":"exec_list","id":"r-000000000005"}`)
	if l := c.next("exec_instances")["executions"].([]any); l[0].(map[string]any)["execId"] != long || l[0].(map[string]any)["state"] != "running" {
		t.Errorf("running first: %v", l)
	}
	c.write(`{"v":1,"type":"exec_abort","id":"r-000000000006","execId":"` + long + `"}`)
	if a := c.next("exec_aborted"); a["id"] != "r-000000000006" || a["execId"] != long {
		t.Errorf("exec_aborted %v", a)
	}
	if x := c.next("exec_exit"); x["aborted"] != true || x["execId"] != long || x["signal"] != "SIGTERM" || x["exitCode"] != nil {
		t.Errorf("aborted exit %v", x)
	}
	c.write(`{"v":1,"type":"exec_abort","id":"r-000000000007","execId":"` + long + `"}`)
	if e := c.next("error"); e["code"] != "unknown_exec" || e["id"] != "r-000000000007" {
		t.Errorf("second abort %v", e)
	}
	// Refusals are exec_failed with the request's id.
	c.write(`{"v":1,"type":"exec_start","id":"r-000000000008","mode":"shell","cwd":"` + dir + `/missing","command":"true"}`)
	if e := c.next("error"); e["code"] != "exec_failed" || e["id"] != "r-000000000008" {
		t.Errorf("bad cwd %v", e)
	}
}

// Checklist 103: closing the owning connection aborts its commands; the
// other connection never sees their output.
func TestExecOwnerDisconnectAborts(t *testing.T) {
	h := newHarness(t, hopts{mod: execOn(nil)})
	owner, other := dialTS(t, h), dialTS(t, h)
	owner.next("hello")
	other.next("hello")
	owner.write(`{"v":1,"type":"exec_start","id":"r-1","mode":"shell","cwd":"` + t.TempDir() + `","command":"echo $$; exec sleep 300"}`)
	id := owner.next("exec_started")["execId"].(string)
	b, _ := base64.StdEncoding.DecodeString(owner.next("exec_output")["base64"].(string))
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	e := h.a.exec.Running(id)
	if e == nil {
		t.Fatal("not running")
	}
	owner.nc.Close()
	select {
	case <-e.Done():
	case <-time.After(waitLimit):
		t.Fatal("the owner's command survived its disconnect")
	}
	if err := processGone(pid); err != nil {
		t.Error(err)
	}
	other.write(`{"v":1,"type":"exec_list","id":"r-2"}`)
	l := other.next("exec_instances")["executions"].([]any)
	if len(l) != 1 || l[0].(map[string]any)["aborted"] != true {
		t.Errorf("list %v", l)
	}
	for len(other.lines) > 0 {
		if m := <-other.lines; m["type"] == "exec_output" || m["type"] == "exec_exit" {
			t.Errorf("another connection got %v", m)
		}
	}
}

// A command tied to a worker runs in its working tree and may not leave
// it (a pifleet addition: exec_start.instanceId).
func TestExecInInstanceTree(t *testing.T) {
	h := newHarness(t, hopts{mod: execOn(nil)})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s1", h.cwd, "default", nil)
	x := &transport.ExecStartFrame{Mode: transport.ExecArgv, Cwd: ".", Executable: "pwd", InstanceID: inst.InstanceID}
	x.ID = "x1"
	c.send(x)
	if _, ok := c.reply("x1").(*transport.ExecStartedFrame); !ok {
		t.Fatal("not started")
	}
	o := nextOf[*transport.ExecOutputFrame](c, nil)
	b, _ := base64.StdEncoding.DecodeString(o.Base64)
	want, _ := filepath.EvalSymlinks(h.cwd)
	if strings.TrimSpace(string(b)) != want {
		t.Errorf("pwd %q, want %q", b, want)
	}
	nextOf[*transport.ExecExitFrame](c, nil)
	for id, cwd := range map[string]string{"x2": "..", "x3": "/"} {
		x := &transport.ExecStartFrame{Mode: transport.ExecArgv, Cwd: cwd, Executable: "pwd", InstanceID: inst.InstanceID}
		x.ID = id
		c.send(x)
		if e, ok := c.reply(id).(*transport.ErrorFrame); !ok || e.Code != CodeExecFailed {
			t.Errorf("cwd %s: %+v", cwd, e)
		}
	}
	x = &transport.ExecStartFrame{Mode: transport.ExecArgv, Cwd: ".", Executable: "pwd", InstanceID: "i-nope"}
	x.ID = "x4"
	c.send(x)
	if e, ok := c.reply("x4").(*transport.ErrorFrame); !ok || e.Code != CodeUnknownInstance {
		t.Errorf("unknown instance: %+v", e)
	}
}

// processGone reports an error if pid still runs (a zombie counts as
// gone: init reaps it).
func processGone(pid int) error {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) && s[i+2] == 'Z' {
		return nil
	}
	return &os.PathError{Op: "still running", Path: strconv.Itoa(pid), Err: os.ErrExist}
}
