package transport

import "encoding/json"

func init() { moreSamples = append(moreSamples, pifleetFrameSamples) }

// pifleetFrameSamples covers the frames of frames_pifleet.go, so that they
// take part in the round-trip, coverage and fuzz-seed tests.
func pifleetFrameSamples() []Frame {
	return []Frame{
		&SpawnProgressFrame{SpawnID: "r-1", Phase: SpawnProvisioning, Bundle: "default", BundleHash: "ab",
			FilesTotal: new(10.0), FilesFetched: new(4.0), FilesReused: new(6.0), BytesFetched: new(4096.0), BytesReused: new(0.0), Message: "syncing"},
		&SpawnProgressFrame{Phase: SpawnAccepted, Bundle: "default"},
		&EventsSinceFrame{Header: Header{ID: "r-2"}, InstanceID: "i-1", Since: 41},
		&EventsReplayedFrame{Header: Header{ID: "r-2"}, InstanceID: "i-1", Since: 41, Count: 3, LastSeq: 44, Missed: 0},
		&SessionEntriesFrame{Header: Header{ID: "r-3"}, InstanceID: "i-1", Path: "/s/a.jsonl", After: "e-9", Limit: new(100.0)},
		&SessionEntriesFrame{Header: Header{ID: "r-4"}},
		&SessionEntriesResultFrame{Header: Header{ID: "r-3"}, Path: "/s/a.jsonl", After: "e-9",
			Entries: json.RawMessage(`[{"type":"message","id":"e-10"}]`), LastEntryID: "e-10", More: true},
		&SessionEntriesResultFrame{Header: Header{ID: "r-4"}, Path: "/s/b.jsonl", Entries: json.RawMessage(`[]`),
			Error: &FsError{Code: "not_found", Message: "no such session"}},
		&RebundleFrame{Header: Header{ID: "r-5"}, InstanceID: "i-1", Bundle: "review", BundleHash: "cd", Registry: "http://100.64.0.1:9787"},
		&RebundledFrame{Header: Header{ID: "r-5"}, InstanceID: "i-1", Switched: true, Bundle: "review", BundleHash: "cd", Degraded: true},
		&RebundledFrame{Header: Header{ID: "r-6"}, InstanceID: "i-1", Bundle: "review", Error: &FsError{Code: "hash_mismatch", Message: "x"}},
		&SetToolsFrame{Header: Header{ID: "r-7"}, InstanceID: "i-1", Tools: []string{"read", "grep"}},
		&ToolsSetFrame{Header: Header{ID: "r-7"}, InstanceID: "i-1", Tools: []string{}},
		&ModelPinFrame{Header: Header{ID: "r-8"}, InstanceID: "i-1", Pin: true},
		&ModelPinnedFrame{Header: Header{ID: "r-8"}, InstanceID: "i-1", Pin: true, Model: &ModelRef{Provider: "p", ID: "m", Thinking: "high"}},
		&ModelDriftFrame{InstanceID: "i-1", Expected: ModelRef{Provider: "p", ID: "m"}, Actual: ModelRef{Provider: "q", ID: "n"}, Refused: true},
		&SessionsRemovedFrame{Machine: "build-01", Paths: []string{"/s/old.jsonl"}},
		&TaskEscalatedFrame{TaskID: "task-1", InstanceID: "i-1", RequestID: "u-1", Reason: "rejected 3 times"},
		&AuthProofFrame{KeyProof: KeyProof{Key: "ed25519:AAAA", Sig: "c2ln"}},
		&HelloFrame{Machine: "orchestrator", Role: RoleServer, PackageVersion: "v0.4.0", Platform: "linux",
			Capabilities: []string{CapabilityPifleet}, Challenge: "Y2hhbGxlbmdl",
			Proofs: []KeyProof{{Key: "ed25519:AAAA", Sig: "c2ln"}, {Key: "ed25519:BBBB", Sig: "c2lnMg"}}},
		&HelloFrame{Machine: "build-01", Role: RoleAgent, PackageVersion: "v0.4.0", Platform: "linux",
			Challenge: "Y2hhbGxlbmdl", Proxied: true},
		&HelloFrame{Machine: "build-02", Role: RoleAgent, PackageVersion: "v0.4.0", Platform: "linux", MaxWorkers: new(4.0)},
		&RepoHeadFrame{Header: Header{ID: "r-9"}, Cwd: "/home/u/api"},
		&RepoHeadResultFrame{Header: Header{ID: "r-9"}, Cwd: "/home/u/api", Head: "0123456789abcdef0123456789abcdef01234567"},
		&RepoHeadResultFrame{Header: Header{ID: "r-10"}, Cwd: "/tmp", Error: &FsError{Code: "not_a_repo", Message: "no HEAD"}},
		&CacheVerifyFrame{Header: Header{ID: "r-12"}},
		&CacheVerifyFrame{Header: Header{ID: "r-13"}, Bundle: "review"},
		&CacheVerifyResultFrame{Header: Header{ID: "r-12"}, Bundles: []BundleCheck{
			{Name: "default", BundleHash: "ab", OK: true},
			{Name: "review", BundleHash: "cd", Error: &FsError{Code: "corrupt", Message: "2 file(s) damaged"},
				Problems: []CacheProblem{{Path: "skills/a/SKILL.md", Reason: "content does not match its hash"}, {Path: "x.txt", Reason: "missing"}}},
			{Name: "broken", Error: &FsError{Code: "bad_pointer", Message: "(pointer): must be an object"}},
		}},
		&CacheVerifyResultFrame{Header: Header{ID: "r-13"}, Bundles: []BundleCheck{}},
		&WorkerExitedFrame{InstanceID: "i-1", ExitCode: new(3.0), Expected: false, State: InstanceExited,
			SessionPath: "/s/a.jsonl", TaskID: "task-1"},
		&WorkerExitedFrame{InstanceID: "i-2", Signal: "KILL", Expected: true, State: InstanceStopped},
		&WorkerExitedFrame{InstanceID: "i-3", Lost: true, State: InstanceLost},
		&SpawnCancelFrame{SpawnID: "spawn-0123456789ab"},
		&UIEndedFrame{InstanceID: "i-1", RequestID: "3f2c9a60-5b7e-4f1a-9c2d-0e8b7a6f5d4c", Reason: UIEndTimedOut},
		&UIEndedFrame{InstanceID: "i-2", RequestID: "u-2", Reason: UIEndCancelled},
		// Extensions of v1 frames.
		&SpawnFrame{Header: Header{ID: "r-11"}, Cwd: "/home/u/api", Bundle: "default", FromSession: "/s/base.jsonl", SessionMode: SessionAttach},
		&SessionsReportFrame{Machine: "build-01", Full: true, Sessions: []SessionInfo{}, Page: new(1.0), Pages: new(3.0)},
		&SpawnedFrame{Header: Header{ID: "r-14"}, Instance: InstanceInfo{InstanceID: "i-4", Cwd: "/home/u/api", State: InstanceRunning,
			Model: &ModelRef{Provider: "p", ID: "m"}, ModelPinned: true}},
	}
}
