//go:build unix

package worker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"example.com/pifleet/internal/fsmkit/fsmtest"
	"example.com/pifleet/internal/shim"
)

// The test binary also plays the shim (as `pifleet-agent shim` would), a
// shim whose process lingers, and misbehaving workers, chosen by its first
// argument.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "shim":
			os.Exit(shim.Main(os.Args[2:]))
		case "lingering-shim":
			os.Exit(lingeringShim(os.Args[2]))
		case "stubborn", "crasher", "toy", "unseen":
			os.Exit(helperWorker(os.Args[1]))
		}
	}
	// The worker's own suite drives its table whole (fleet/agent drives it
	// too, and checks only for dropped events).
	const notYet = "no test drives it yet"
	trace := fsmtest.StartTrace(fsmtest.Checks{Cover: []fsmtest.Coverage{fsmtest.Cover(WorkerTable,
		fsmtest.Unfired{Src: "stopping", Event: "runStarted", Dst: "stopping", Reason: notYet},
		fsmtest.Unfired{Src: "idle", Event: "exited", Dst: "exited", Reason: notYet},
		fsmtest.Unfired{Src: "starting", Event: "shimLost", Dst: "lost", Reason: notYet},
		fsmtest.Unfired{Src: "idle", Event: "shimLost", Dst: "lost", Reason: notYet},
		fsmtest.Unfired{Src: "running", Event: "shimLost", Dst: "lost", Reason: notYet},
		fsmtest.Unfired{Src: "stopping", Event: "shimLost", Dst: "lost", Reason: notYet},
	)}})
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.Exit(trace.Check(code)) }))
}

// helperWorker answers get_state like pi. As "toy" it runs each prompt as
// a one-message run and exits at stdin EOF. As "stubborn" it ignores
// abort, stdin EOF and SIGTERM (only SIGKILL ends it). As "crasher" it
// writes to stderr and exits 3 at its first prompt. As "unseen" it starts
// a tool at each prompt (a child in a process group of its own, holding
// the WITNESS FIFO) before any agent_start reached the agent, and ends it
// only when aborted: stdin EOF leaves it running, as a busy pi would.
func helperWorker(role string) int {
	if role == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
		if path := os.Getenv("WITNESS"); path != "" {
			// A child in the worker's process group, deaf to SIGTERM too,
			// that holds the witness FIFO while it lives.
			child := exec.Command("/bin/sh", "-c", `exec sleep 300 3>"$WITNESS"`)
			if err := child.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	}
	var tool *exec.Cmd // unseen: the running tool
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var cmd struct{ ID, Type, Message string }
		if json.Unmarshal(in.Bytes(), &cmd) != nil {
			continue
		}
		switch cmd.Type {
		case "get_state":
			fmt.Printf(`{"id":%q,"type":"response","command":"get_state","success":true,"data":{"model":{"id":"toy-1","provider":"test"},"isStreaming":false,"sessionFile":"/tmp/toy-session.jsonl","sessionId":"s","messageCount":0,"pendingMessageCount":0}}`+"\n", cmd.ID)
		case "prompt":
			fmt.Printf(`{"id":%q,"type":"response","command":"prompt","success":true}`+"\n", cmd.ID)
			if role == "unseen" {
				tool = exec.Command("/bin/sh", "-c", `exec sleep 300 3>"$WITNESS"`)
				tool.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := tool.Start(); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 1
				}
				continue
			}
			fmt.Println(`{"type":"agent_start"}`)
			switch role {
			case "crasher":
				fmt.Fprintln(os.Stderr, "boom: the worker crashed")
				return 3
			case "toy":
				fmt.Printf(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":%q}],"stopReason":"stop"}}`+"\n", "echo: "+cmd.Message)
				fmt.Println(`{"type":"agent_end","messages":[]}`)
			}
		case "abort":
			if role == "unseen" && tool != nil {
				syscall.Kill(-tool.Process.Pid, syscall.SIGKILL)
				tool.Wait()
				tool = nil
			}
			if role == "toy" || role == "unseen" {
				fmt.Printf(`{"id":%q,"type":"response","command":"abort","success":true}`+"\n", cmd.ID)
			}
		}
	}
	if role == "toy" {
		return 0
	}
	select {} // deaf to EOF
}

// lingeringShim is a shim whose process stays after it finished serving,
// until the FIFO release is opened for writing: a shim slow to go away.
func lingeringShim(release string) int {
	code := shim.Main(nil)
	f, err := os.Open(release) // blocks until a writer opens it
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f.Close()
	return code
}
