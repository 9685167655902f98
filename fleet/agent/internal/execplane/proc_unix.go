//go:build unix

package execplane

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// ownGroup makes the command the leader of a new process group, so that
// everything it starts can be signalled at once.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group led by pid (errors such as
// ESRCH, an empty group, are ignored).
func signalGroup(pid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig)
}

// signalName is the name Node gives a signal ("SIGTERM").
func signalName(ws syscall.WaitStatus) (string, bool) {
	if !ws.Signaled() {
		return "", false
	}
	return unix.SignalName(ws.Signal()), true
}

// defaultShell is bash -lc, or sh -lc where bash is absent.
func defaultShell() []string {
	if p, err := exec.LookPath("/bin/bash"); err == nil {
		return []string{p, "-lc"}
	}
	return []string{"/bin/sh", "-lc"}
}
