package shim

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// awaitSessionEnd waits until no process of session sid is left (the shim
// leads its session, and its worker and watchdog stay in it), for at most a
// minute. Each member found is waited for through a pidfd, so the wait ends
// when the processes do; members they started meanwhile are found by the
// next look.
func awaitSessionEnd(t *testing.T, sid int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		members := sessionMembers(t, sid)
		if len(members) == 0 {
			return
		}
		for _, pid := range members {
			fd, err := unix.PidfdOpen(pid, 0)
			if errors.Is(err, unix.ESRCH) {
				continue // gone already
			}
			if err != nil {
				t.Fatalf("pidfd of %d: %v", pid, err)
			}
			ms := max(int(time.Until(deadline).Milliseconds()), 0)
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
			unix.Close(fd)
			if err != nil && !errors.Is(err, unix.EINTR) {
				t.Fatalf("waiting for %d: %v", pid, err)
			}
			if n == 0 && err == nil {
				t.Fatalf("process %d of the shim's session still runs after a minute", pid)
			}
		}
	}
}

// sessionMembers lists the live processes whose session is sid.
func sessionMembers(t *testing.T, sid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended while we looked
		}
		// pid (comm) state ppid pgrp session …; comm may hold spaces.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 4 || fields[0] == "Z" {
			continue
		}
		if got, _ := strconv.Atoi(fields[3]); got == sid {
			pids = append(pids, pid)
		}
	}
	return pids
}
