package fleet_test

import (
	"errors"
	"strings"
	"testing"

	"example.com/pifleet/fleet"
)

// TestTypedErrorsMatchTheirSentinelsAndNameWhatFailed: every typed error
// of the SDK matches the sentinels its doc promises (and no other of
// them), and its message carries the ids and codes a user needs.
func TestTypedErrorsMatchTheirSentinelsAndNameWhatFailed(t *testing.T) {
	all := []error{fleet.ErrWorkerGone, fleet.ErrInstanceEnded, fleet.ErrSpawn, fleet.ErrSpawnStopped, fleet.ErrInvalidState,
		fleet.ErrFileService, fleet.ErrRebundle, fleet.ErrInvalidConfig, fleet.ErrAgentRefused, fleet.ErrUnknownSession,
		fleet.ErrExecFailed, fleet.ErrDelivery, fleet.ErrMergeConflict, fleet.ErrBadDisposition, fleet.ErrBadDeliveryMode,
		fleet.ErrUnexpectedAnswer}
	for _, tc := range []struct {
		err   error
		is    []error
		words []string
	}{
		{&fleet.WorkerGoneError{InstanceID: "i-1", Reason: "exited with code 3"}, []error{fleet.ErrWorkerGone, fleet.ErrInstanceEnded}, []string{"i-1", "exited with code 3"}},
		{&fleet.InstanceEndedError{InstanceID: "i-1", State: fleet.StateStopped}, []error{fleet.ErrInstanceEnded, fleet.ErrInvalidState}, []string{"i-1", "stopped"}},
		{&fleet.InstanceEndedError{InstanceID: "i-1", State: fleet.StateStopped, Gone: &fleet.WorkerGoneError{InstanceID: "i-1", Reason: "killed by signal KILL"}},
			[]error{fleet.ErrInstanceEnded, fleet.ErrInvalidState, fleet.ErrWorkerGone}, []string{"i-1", "killed by signal KILL"}},
		{&fleet.DispositionError{Disposition: "archive"}, []error{fleet.ErrBadDisposition}, []string{`"archive"`, "stop", "keep_idle"}},
		{&fleet.SpawnError{Agent: "box", Bundle: "b", Code: "max_workers", Message: "full"}, []error{fleet.ErrSpawn}, []string{"box", `"b"`, "max_workers", "full"}},
		{&fleet.SpawnStoppedError{Agent: "box", Bundle: "b", SpawnID: "sp-1"}, []error{fleet.ErrSpawnStopped, fleet.ErrInstanceEnded}, []string{"box", "sp-1"}},
		{&fleet.StateError{Kind: "task", ID: "t-1", State: "accepted", Op: "reject"}, []error{fleet.ErrInvalidState}, []string{"reject task t-1", "accepted"}},
		{&fleet.FileError{Op: "fs_read", Code: "not_found", Message: "x.go"}, []error{fleet.ErrFileService}, []string{"fs_read", "not_found", "x.go"}},
		{&fleet.RebundleError{InstanceID: "i-1", Bundle: "old", Target: "new", Code: "fetch_failed", Message: "down"}, []error{fleet.ErrRebundle}, []string{"i-1", `"new"`, `"old"`, "fetch_failed"}},
		{&fleet.ConfigError{Field: "TailBuffer", Reason: "must be at least 1"}, []error{fleet.ErrInvalidConfig}, []string{"TailBuffer", "at least 1"}},
		{&fleet.AgentRefusedError{Agent: "box", Reason: "policy deny"}, []error{fleet.ErrAgentRefused}, []string{"box", "policy deny"}},
		{&fleet.UnknownSessionError{Ref: "s-1"}, []error{fleet.ErrUnknownSession}, []string{"unknown session: s-1"}},
		{&fleet.UnknownSessionError{Ref: "baseline:repo", Machine: "box"}, []error{fleet.ErrUnknownSession}, []string{"unknown baseline: repo", "(on box)"}},
		{&fleet.ExecError{Agent: "box", Code: "exec_disabled", Message: "off"}, []error{fleet.ErrExecFailed}, []string{"box", "exec_disabled"}},
		{&fleet.DeliveryError{TaskID: "t-1", Code: "merge_conflict", Message: "a.go"}, []error{fleet.ErrDelivery, fleet.ErrMergeConflict}, []string{"t-1", "merge_conflict"}},
		{&fleet.UnexpectedAnswerError{Request: "fs_read", Want: "fs_result", Got: "tools_set"}, []error{fleet.ErrUnexpectedAnswer}, []string{"fs_read", "fs_result", "tools_set"}},
		{&fleet.DeliveryModeError{Mode: "squash"}, []error{fleet.ErrBadDeliveryMode}, []string{`"squash"`, "branch", "patch", "merge"}},
		{&fleet.DeliveryError{TaskID: "t-1", Code: "target_dirty"}, []error{fleet.ErrDelivery}, []string{"target_dirty"}},
		{&fleet.MaxRejectsError{Value: 2.5}, nil, []string{"maxRejects", "2.5"}},
	} {
		msg := tc.err.Error()
		for _, s := range all {
			want := false
			for _, w := range tc.is {
				want = want || w == s
			}
			if got := errors.Is(tc.err, s); got != want {
				t.Errorf("%T %q: errors.Is(%v) = %v, want %v", tc.err, msg, s, got, want)
			}
		}
		for _, w := range tc.words {
			if !strings.Contains(msg, w) {
				t.Errorf("%T: message %q does not name %q", tc.err, msg, w)
			}
		}
	}
}
