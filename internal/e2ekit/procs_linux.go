package e2ekit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// WorkerProcesses finds, through the process tree, the shim of instance
// instanceID of the agent whose state directory is stateDir, and the
// worker process that shim supervises, so that a test can kill either one
// as a crash would: the shim is the process whose stderr is the
// instance's shim log; the worker is the shim's child that joined its
// watchdog's process group (the watchdog, the shim's other child, leads
// that group).
func WorkerProcesses(stateDir, instanceID string) (shimPID, workerPID int, err error) {
	procs, err := shimProcesses(filepath.Join(stateDir, workersDir))
	if err != nil {
		return 0, 0, err
	}
	for _, p := range procs {
		if p.instanceID == instanceID {
			shimPID = p.pid
		}
	}
	if shimPID == 0 {
		return 0, 0, fmt.Errorf("e2ekit: no shim of %s runs under %s", instanceID, stateDir)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, pgrp, ok := parentAndGroup(pid)
		if ok && ppid == shimPID && pgrp != pid {
			return shimPID, pid, nil
		}
	}
	return shimPID, 0, fmt.Errorf("e2ekit: the shim of %s (pid %d) has no worker process", instanceID, shimPID)
}

// parentAndGroup reads a process's parent pid and process group from
// /proc/<pid>/stat (the fields after the command name, which may itself
// hold spaces and parentheses).
func parentAndGroup(pid int) (ppid, pgrp int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:]) // state ppid pgrp …
	if len(f) < 3 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	return ppid, pgrp, err1 == nil && err2 == nil
}

// Shims returns the shims that run under the agent whose state directory
// is stateDir, by instance id, found through the process tree (their
// stderr is the instance's shim log): what a test checks to know that no
// worker was left behind.
func Shims(stateDir string) (map[string]int, error) {
	procs, err := shimProcesses(filepath.Join(stateDir, workersDir))
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(procs))
	for _, p := range procs {
		out[p.instanceID] = p.pid
	}
	return out, nil
}
