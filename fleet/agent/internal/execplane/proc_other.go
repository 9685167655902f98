//go:build !unix

package execplane

import (
	"os/exec"
	"strconv"
	"syscall"
)

func ownGroup(*exec.Cmd) {}

// signalGroup ends the process tree with taskkill (reference 1.17).
func signalGroup(pid int, _ bool) {
	_ = exec.Command("taskkill", "/pid", strconv.Itoa(pid), "/t", "/f").Run()
}

func signalName(syscall.WaitStatus) (string, bool) { return "", false }

func defaultShell() []string {
	return []string{"powershell.exe", "-NoLogo", "-NoProfile", "-NonInteractive", "-Command"}
}
