//go:build unix

package worker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
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
		case "stubborn", "crasher", "toy", "unseen", "mute", "late", "pausing":
			os.Exit(helperWorker(os.Args[1]))
		}
	}
	// The worker's own suite drives its table whole (fleet/agent drives it
	// too, and checks only for dropped events).
	var known []fsmtest.Unfired
	if runtime.GOOS != "linux" {
		// lost_test.go finds the shim to kill through /proc.
		for _, s := range []string{"starting", "idle", "running", "stopping"} {
			known = append(known, fsmtest.Unfired{Src: s, Event: "shimLost", Dst: "lost", Reason: "the shim is found through /proc"})
		}
		known = append(known, fsmtest.Unfired{Src: "idle", Event: "exited", Dst: "exited", Reason: "in lost_test.go"})
	}
	trace := fsmtest.StartTrace(fsmtest.Checks{Cover: []fsmtest.Coverage{fsmtest.Cover(WorkerTable, known...)}})
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.Exit(trace.Check(code)) }))
}

// helperWorker answers get_state like pi. As "toy" it runs each prompt as
// a one-message run and exits at stdin EOF. As "stubborn" it ignores
// abort, stdin EOF and SIGTERM (only SIGKILL ends it). As "crasher" it
// writes to stderr and exits 3 at its first prompt. As "unseen" it starts
// a tool at each prompt (a child in a process group of its own, holding
// the WITNESS FIFO) before any agent_start reached the agent, and ends it
// only when aborted: stdin EOF leaves it running, as a busy pi would. As
// "mute" it reads its first get_state, then holds the WITNESS FIFO and
// never answers anything: a worker that hangs before its first get_state. A stubborn worker that has
// ABORTED set opens that FIFO when it reads an abort (and still ignores it).
// As "late" it starts a prompt's run only when that run is aborted: the
// run's agent_start and agent_end come after the abort, and it exits at
// stdin EOF. As "pausing" it streams one message_update of a prompt's
// answer and then waits: the rest of the run comes when it is aborted.
func helperWorker(role string) int {
	if role == "mute" {
		// The first get_state is written once the agent is attached to
		// the shim: holding the FIFO only from then on tells a test that
		// a shim killed now is lost to an attached agent, not one still
		// starting.
		in := bufio.NewReader(os.Stdin)
		if _, err := in.ReadBytes('\n'); err != nil {
			return 1
		}
		f, err := os.OpenFile(os.Getenv("WITNESS"), os.O_WRONLY, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		io.Copy(io.Discard, in)
		select {} // deaf to EOF
	}
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
	pending := false   // late: a prompt whose run has not started
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var cmd struct{ ID, Type, Message string }
		if json.Unmarshal(in.Bytes(), &cmd) != nil {
			continue
		}
		switch cmd.Type {
		case "get_state":
			// Streaming while a tool runs, as pi is from the prompt on.
			fmt.Printf(`{"id":%q,"type":"response","command":"get_state","success":true,"data":{"model":{"id":"toy-1","provider":"test"},"isStreaming":%t,"sessionFile":"/tmp/toy-session.jsonl","sessionId":"s","messageCount":0,"pendingMessageCount":0}}`+"\n", cmd.ID, tool != nil || pending)
		case "prompt":
			fmt.Printf(`{"id":%q,"type":"response","command":"prompt","success":true}`+"\n", cmd.ID)
			if role == "late" {
				pending = true
				continue
			}
			if role == "pausing" {
				fmt.Println(`{"type":"agent_start"}`)
				fmt.Println(`{"type":"message_start","message":{"role":"assistant","content":[]}}`)
				fmt.Println(`{"type":"message_update","message":{"role":"assistant","content":[{"type":"text","text":"h"}]},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"h"}}`)
				pending = true
				continue
			}
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
			if path := os.Getenv("ABORTED"); path != "" && role == "stubborn" {
				if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
					f.Close()
				}
			}
			if role == "unseen" && tool != nil {
				syscall.Kill(-tool.Process.Pid, syscall.SIGKILL)
				tool.Wait()
				tool = nil
			}
			if role == "late" && pending {
				pending = false
				fmt.Println(`{"type":"agent_start"}`)
				fmt.Println(`{"type":"agent_end","messages":[]}`)
			}
			if role == "pausing" && pending {
				pending = false
				fmt.Println(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"h"}],"stopReason":"aborted"}}`)
				fmt.Println(`{"type":"agent_end","messages":[]}`)
			}
			if role == "toy" || role == "unseen" || role == "late" || role == "pausing" {
				fmt.Printf(`{"id":%q,"type":"response","command":"abort","success":true}`+"\n", cmd.ID)
			}
		}
	}
	if role == "toy" || role == "late" || role == "pausing" {
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
