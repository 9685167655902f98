package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// An attach whose agent is gone by the time the shim reads its hello (an
// agent killed right after it connected, its hello still in the socket)
// does not replace the attached agent. It did: a restarted agent that was
// stopping the worker (worker.Discard) was told it had been replaced,
// gave up, and the worker ran on with nobody attached (agent kill
// campaign, "replaced by a newer attachment"). The shim is held with
// SIGSTOP while the dead agent connects, writes its hello and closes, as
// a loaded machine holds it.
func TestAttachOfAGoneAgentReplacesNobody(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "shim.log")
	if err := syscall.Mkfifo(logPath, 0o600); err != nil {
		t.Fatal(err)
	}
	// Read-write: opening it blocks neither side; closing it ends the scan.
	logR, err := os.OpenFile(logPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	messages := make(chan string, 64)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(logR)
		for sc.Scan() {
			var l struct{ Message string }
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				select {
				case messages <- l.Message:
				default:
				}
			}
		}
	}()
	defer func() { logR.Close(); <-scanned }()

	cfg := testConfig(t)
	cfg.Command = shWorker("exec sleep 600")
	c, err := Start(t.Context(), StartConfig{Executable: os.Args[0], Args: []string{"shim"}, LogPath: logPath, Shim: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Close()
		syscall.Kill(c.shim.pid, syscall.SIGKILL)
		<-c.ShimExited()
	}()
	for m := range messages {
		if m == "agent attached" {
			break
		}
	}

	shimPID := c.Attached().ShimPID
	if err := syscall.Kill(shimPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	gone, err := dialSocket(t.Context(), cfg.Socket)
	if err != nil {
		syscall.Kill(shimPID, syscall.SIGCONT)
		t.Fatal(err)
	}
	err = newFrameWriter(gone).writeJSON(frameHello, nil, helloMsg{V: protocolVersion, InstanceID: cfg.InstanceID, Token: cfg.Token})
	gone.Close()
	if err := syscall.Kill(shimPID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The shim has dealt with the gone agent's hello once it logs it.
	for m := range messages {
		if m == "agent detached" || m == staleAttachMessage {
			break
		}
	}

	if err := c.Stop(t.Context(), StopOptions{CloseStdin: true}); err != nil {
		t.Fatalf("the attached agent's stop: %v", err)
	}
	exited := false
	for ev := range c.Events() {
		exited = exited || ev.Exit != nil
		if err := c.Ack(ev.Seq); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	if err := c.Err(); !exited || err != nil && !errors.Is(err, ErrExited) {
		t.Fatalf("the attached agent's stream ended with %v before the worker's exit", err)
	}
}
