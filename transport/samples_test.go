package transport

import "encoding/json"

// moreSamples lets the test file of a frames_*.go file that adds frame
// types contribute their samples (from an init function), so that the
// round-trip, coverage and fuzz-seed tests include them:
//
//	func init() { moreSamples = append(moreSamples, myFrameSamples) }
var moreSamples []func() []Frame

// sampleFrames returns one frame of every type, with optional fields filled
// in wherever a type has them (traceId, stats, timedOut, nested SessionInfo,
// exec records, fs entries, …), plus minimal variants of the types whose
// optional fields matter, then the samples of moreSamples.
func sampleFrames() []Frame {
	out := referenceSamples()
	for _, more := range moreSamples {
		out = append(out, more()...)
	}
	return out
}

// referenceSamples covers the 36 frame types of protocol v1.
func referenceSamples() []Frame {
	text := "line1\nline2 — naïve ✓"
	empty := ""
	sig := "SIGTERM"
	return []Frame{
		&HelloFrame{Machine: "build-01", Role: RoleAgent, PackageVersion: "0.0.1", Platform: "linux",
			AvailableModels: []ModelRef{{Provider: "anthropic", ID: "claude-sonnet-4-5", Thinking: "high"}, {Provider: "openai", ID: "gpt-5"}},
			Capabilities:    []string{"exec-v1"}},
		&HelloFrame{Machine: "m", Role: RoleServer, PackageVersion: "1", Platform: "darwin"},
		&HeartbeatFrame{},
		&ErrorFrame{Header: Header{ID: "r-000000000001"}, Code: "unknown_instance", Message: "no instance i-1"},
		&SpawnFrame{Header: Header{ID: "r-0123456789ab", TraceID: "t-1"}, Cwd: "/home/u/repo", Bundle: "default",
			BundleHash: "ab12", FromSession: "/s/base.jsonl", Model: &ModelRef{Provider: "p", ID: "m", Thinking: "low"},
			Env: map[string]string{"PI_FLEET_SERVER": "http://100.64.0.1:9787", "B": ""}, Budget: &Budget{MaxCost: new(2.5)}},
		&SpawnFrame{Cwd: "/", Bundle: "b"},
		&SpawnedFrame{Header: Header{ID: "r-1", TraceID: "t-1"}, Instance: InstanceInfo{InstanceID: "i-0123456789ab", PID: new(4242.0),
			Cwd: "/w", Bundle: "default", BundleHash: "ff", SessionPath: "/s.jsonl", State: InstanceRunning, Model: &ModelRef{Provider: "p", ID: "m"}}},
		&SpawnErrorFrame{Header: Header{ID: "r-2"}, Code: "max_workers", Message: "machine at capacity: 4/4 workers running"},
		&StopFrame{Header: Header{ID: "r-3"}, InstanceID: "i-1"},
		&StoppedFrame{Header: Header{ID: "r-3"}, InstanceID: "i-1", Forced: true, SessionPath: "/s.jsonl"},
		&StoppedFrame{InstanceID: "i-2"},
		&ListFrame{Header: Header{ID: "r-4"}},
		&InstancesFrame{Header: Header{ID: "r-4"}, Instances: []InstanceInfo{
			{InstanceID: "i-1", PID: new(1.0), Cwd: "/a", Bundle: "default", State: InstanceRunning},
			{InstanceID: "i-2", Cwd: "/b", State: InstanceLost, SessionPath: "/x.jsonl"},
		}},
		&InstancesFrame{Instances: []InstanceInfo{}},
		&RPCFrame{InstanceID: "i-1", Command: json.RawMessage(`{"type":"prompt","message":"hi\u2028there"}`), TaskID: "task-1"},
		&RPCFrame{InstanceID: "i-1", Command: json.RawMessage(`null`)},
		&EventFrame{InstanceID: "i-1", Event: json.RawMessage(`{"type":"message_update","delta":"x"}`)},
		&TaskDoneFrame{TaskID: "task-1", InstanceID: "i-1", Seq: 1730000000123, Status: TaskSettled, Summary: "done",
			LastAssistantMessage: "All tests pass.", Stats: &TaskStats{Turns: new(3.0), ToolCalls: new(7.0), FilesChanged: new(2.0), Cost: new(0.0123)}},
		&TaskDoneFrame{TaskID: "task-2", InstanceID: "i-1", Seq: 1.5, Status: TaskAborted, Summary: ""},
		&TaskDoneAckFrame{TaskID: "task-1", Seq: 1730000000123},
		&TaskAcceptFrame{TaskID: "task-1", Disposition: DispositionKeepIdle, Deliver: DeliverNone},
		&TaskRejectFrame{TaskID: "task-1", Feedback: "add a test"},
		&DeliverFrame{TaskID: "task-1", InstanceID: "i-1", Mode: DeliverPR},
		&DeliveredFrame{TaskID: "task-1", Mode: DeliverPatch, Branch: "fleet/t1", PRURL: "https://example.com/pr/1", Patch: "diff --git"},
		&UIRequestFrame{InstanceID: "i-1", RequestID: "u-1", Kind: UISelect, Title: "Pick", Message: "one of", Options: []string{"a", "b"}},
		&UIResponseFrame{InstanceID: "i-1", RequestID: "u-1", Value: json.RawMessage(`"a"`), TimedOut: true},
		&UIResponseFrame{InstanceID: "i-1", RequestID: "u-2", Value: json.RawMessage(`null`)},
		&SessionsReportFrame{Machine: "build-01", Full: true, Sessions: []SessionInfo{
			{SessionID: "s1", Path: "/s/s1.jsonl", Name: "baseline:main", Cwd: "/repo", Kind: SessionBaseline, Pinned: true,
				ParentSession: "/s/s0.jsonl", Bundle: "default", BundleHash: "ab", GitHead: "deadbeef",
				TaskIDs: []string{"task-1"}, Labels: []string{"x", "y"}, UpdatedAt: 1730000000123.456, AttachedInstanceID: "i-1"},
			{SessionID: "s2", Path: "/s/s2.jsonl", Cwd: "(unknown)", Kind: SessionScratch, UpdatedAt: 1},
		}},
		&SessionsReportFrame{Machine: "m", Sessions: []SessionInfo{}},
		&SessionSearchFrame{Header: Header{ID: "r-5"}, Query: "needle", Cwd: "/repo"},
		&SessionHitsFrame{Header: Header{ID: "r-5"}, Hits: []SessionHit{{SessionID: "s1", Path: "/s/s1.jsonl", Snippet: "a needle here"}}},
		&SessionHitsFrame{Hits: []SessionHit{}},
		&ExecStartFrame{Header: Header{ID: "r-6"}, Mode: ExecArgv, Cwd: "/tmp", Executable: "ls", Args: []string{"-la", ""}, TimeoutSeconds: new(30.0)},
		&ExecStartFrame{Mode: ExecShell, Cwd: "/tmp", Command: "echo hi"},
		&ExecStartedFrame{Header: Header{ID: "r-6"}, ExecID: "x-0123456789ab", StartedAt: 1730000000000},
		&ExecOutputFrame{ExecID: "x-1", Seq: 0, Stream: Stderr, Base64: "aGk="},
		&ExecExitFrame{ExecID: "x-1", ExitCode: new(0.0), TimedOut: false, Aborted: false, DurationMs: 12},
		&ExecExitFrame{ExecID: "x-2", Signal: &sig, TimedOut: true, Aborted: true, DurationMs: 500.5},
		&ExecAbortFrame{Header: Header{ID: "r-7"}, ExecID: "x-1"},
		&ExecAbortedFrame{Header: Header{ID: "r-7"}, ExecID: "x-1"},
		&ExecListFrame{Header: Header{ID: "r-8"}},
		&ExecInstancesFrame{Header: Header{ID: "r-8"}, Executions: []ExecRecord{
			{ExecID: "x-1", Mode: ExecShell, Cwd: "/", State: ExecRunning, StartedAt: 1},
			{ExecID: "x-2", Mode: ExecArgv, Cwd: "/", State: ExecExited, StartedAt: 1, FinishedAt: new(2.0), ExitCode: new(137.0), TimedOut: true, Aborted: true},
		}},
		&ExecInstancesFrame{Executions: []ExecRecord{}},
		&FsReadFrame{Header: Header{ID: "r-9"}, InstanceID: "i-1", Path: "src/a.go", Offset: new(1.0), Limit: new(0.0)},
		&FsListFrame{Header: Header{ID: "r-10"}, InstanceID: "i-1", Path: "."},
		&FsGrepFrame{Header: Header{ID: "r-11"}, InstanceID: "i-1", Pattern: `func \w+`, Glob: "**/*.go"},
		&FsDiffFrame{Header: Header{ID: "r-12"}, InstanceID: "i-1", Ref: "HEAD~1", Staged: true, Stat: true, RevParse: true},
		&FsResultFrame{Header: Header{ID: "r-9"}, Done: true, Text: &text, Truncated: true},
		&FsResultFrame{Header: Header{ID: "r-13"}, Done: true, Text: &empty},
		&FsResultFrame{Header: Header{ID: "r-10"}, Done: true, Entries: []FsEntry{{Name: "src", Kind: FsDir}, {Name: "a.png", Kind: FsFile, Bytes: new(1024.0)}}},
		&FsResultFrame{Header: Header{ID: "r-14"}, Done: true, Base64: "iVBORw0KGgo=", Mime: "image/png"},
		&FsResultFrame{Header: Header{ID: "r-15"}, Done: false, Error: &FsError{Code: "path_escape", Message: "path escapes root: ../x"}},
	}
}
