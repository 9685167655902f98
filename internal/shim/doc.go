// Package shim keeps pi workers running across restarts of the pifleet
// agent, the way containerd-shim keeps containers alive across containerd
// restarts (DESIGN.md decision 6: a worker is re-adopted, or reported lost,
// and no pid that may have been reused is ever signalled).
//
// The agent never holds a worker's stdio itself. For each worker it starts
// a shim process (the agent binary's hidden `shim` subcommand, which calls
// Main) in a session of its own, so that the shim survives the agent. The
// shim starts the worker as its child, holds the worker's stdin, stdout and
// stderr pipes, and serves one unix socket. When the agent restarts (crash,
// kill -9, upgrade) it attaches again with the instance id and the token it
// stored, and resumes the stdout stream where it left off.
//
//	agent ──Start──▶ shim (setsid) ──▶ watchdog sh ┐ process group
//	  ▲                 │  pipes ─────▶ worker (pi) ┘ (pgid = watchdog pid)
//	  └── unix socket ◀─┘
//
// # Agent side
//
// Start launches a shim and attaches; Attach re-attaches after a restart.
// The agent stores the instance id, token and socket path before calling
// Start, so that a crash during Start still leaves it able to find the
// shim. A Client delivers Events in seq order (stdout lines, gaps, the
// exit) and offers Write (atomic: a message reaches the worker whole or not
// at all), Post (a Write that returns once sent, its answer to come),
// CloseStdin, Signal, Stop, Status, Ack, and Detach/Close (which
// leave the worker running). Errors are typed: ErrNoShim (nobody serves the
// socket: the worker is lost), ErrWrongShim (a shim refused the instance
// id or token), *GapError (lines lost while nobody acknowledged them),
// *RemoteError for what the shim reported.
//
// The stream's seqs start at 1 and increase by one per stdout line; the
// exit record takes the seq after the last line. The shim keeps every
// record until an agent acknowledges it (Ack is cumulative). While no agent
// is attached, or the attached one is slow, the shim keeps reading the
// worker's stdout (a worker never blocks on a full pipe) into a buffer
// capped by Config.BufferBytes; on overflow the oldest unacknowledged lines
// are dropped, and the next reader at that point gets an explicit gap
// instead. Delivery is at least once across agent crashes: lines handled
// but not yet acknowledged when the agent died are delivered again, unless
// the agent stored how far it got and passes ResumeFrom. Detach (unlike
// Close) waits until the shim has applied every Ack, so a planned restart
// gets no line twice.
//
// Lines are split like pi splits its input: on LF only (never on U+2028 or
// U+2029), one trailing CR stripped, a last line without LF still a line.
// A line longer than Config.MaxLine (16 MiB) is never held whole: it is
// counted as it streams by and delivered as an Event with Overlong set.
//
// # Shim side
//
// One agent is attached at a time; an authenticated newer attachment
// replaces the older one, which is told so (ErrReplaced). When the worker
// exits, the shim sweeps its process group, drains its output, and appends
// the exit record (code or signal, last 4,096 bytes of stderr). It then
// serves until an agent acknowledges the exit record, or until
// Config.Linger (24 h) passes with nobody attached, and then removes its
// socket and exits. Stop runs the agent's chosen procedure inside the shim
// (close stdin, wait, SIGTERM the group, wait, SIGKILL), so it completes
// even if the agent dies meanwhile; the policy (write pi's abort first,
// how long to wait) stays with the agent.
//
// # Process groups and the watchdog
//
// The worker does not lead its own process group: a tiny /bin/sh watchdog
// does, and the worker joins that group. The watchdog's stdin is a pipe
// only the shim holds. This buys two things on every unix:
//
//   - No orphans when the shim dies, even by SIGKILL: the watchdog reads
//     EOF, sends SIGTERM to the group (pi kills its tool process trees on
//     SIGTERM), waits Config.KillGrace, then SIGKILL. pi would also see EOF
//     on its stdin and exit, but EOF alone leaves a running tool orphaned.
//     prctl(PR_SET_PDEATHSIG) was considered and rejected: it is Linux only,
//     it fires when the creating OS thread exits (not the process, a known
//     trap with Go's thread management), and it reaches the worker only,
//     not the tools in its group.
//   - Signals never hit a reused pid: the group id is the watchdog's pid,
//     and the shim reaps the watchdog only after its last signal to the
//     group (after the worker's exit, when it sweeps the group with
//     SIGKILL). The agent never signals pids itself; it asks the shim.
//
// A process that leaves the group (setsid, or Node's detached spawn) is
// out of reach of both; pi tracks and kills its own tool trees on SIGTERM,
// which is why stopping goes through SIGTERM before SIGKILL.
//
// # Command-line contract
//
// The agent binary must expose Main as a hidden subcommand that takes no
// arguments, e.g. `pifleet-agent shim`, and exit with its result. Start
// runs StartConfig.Executable with StartConfig.Args and these descriptors:
//
//	fd 0, 1  /dev/null
//	fd 2     StartConfig.LogPath (appended; the shim logs JSON), or /dev/null
//	fd 3     a pipe carrying one JSON Config (the secret token never appears
//	         in argv or the environment), then EOF
//	fd 4     a pipe on which the shim writes one line, then closes it:
//	         {"ready":{"shimPid":…,"workerPid":…,"pgid":…}} or
//	         {"error":{"code":"spawn","message":"…"}}
//
// A shim that cannot write its ready line (the agent that started it died
// before reading it) stops its worker and exits: nobody may know of it.
//
// The shim ignores SIGHUP. On SIGTERM or SIGINT it stops its worker
// (SIGTERM to the group, SIGKILL after KillGrace), gives an attached agent
// DrainTimeout to acknowledge the exit, and exits. When the agent runs
// under systemd, its unit needs KillMode=process (as containerd's does), or
// stopping the agent kills every shim in its cgroup too.
//
// # Wire protocol (version 1)
//
// Every frame is a 4-byte big-endian body length, a type byte, and the
// body. Integers are big-endian; req is a uint32 request id chosen by the
// agent, echoed by the response. JSON bodies ignore unknown fields. Agent
// frames and the shim's control frames are at most 1 MiB + 64 bytes; line
// frames at most MaxLine + 8.
//
//	agent → shim
//	0x01 hello        JSON {"v":1,"instanceId","token","resumeFrom"}; first frame,
//	                  within Config.HandshakeTimeout
//	0x02 write        req, flags, bytes for stdin (at most 1 MiB). Flag bit 0:
//	                  more of this message follows. The shim assembles a
//	                  message (at most 64 MiB) and writes it whole, in order;
//	                  only its last frame's req is answered.
//	0x03 close_stdin  req
//	0x04 signal       req, JSON {"signal":"TERM"|"KILL"|"INT"|"HUP"}
//	0x05 stop         req, JSON {"closeStdin":bool,"graceMs":n}
//	0x06 status       req
//	0x07 ack          uint64 seq: every record through seq is handled (no response)
//
//	shim → agent
//	0x81 welcome      JSON {"v":1,"maxLine","window","status":Status}
//	0x82 refused      JSON {"code","message"}, then the shim closes
//	0x83 line         uint64 seq, the line's bytes
//	0x84 overlong     uint64 seq, uint64 length of the dropped line
//	0x85 gap          uint64 from, uint64 to: lines from..to-1 are lost
//	0x86 exit         uint64 seq, JSON ExitStatus
//	0x87 response     req, JSON {"error":{"code","message"}?,"status":Status?}
//	0x88 replaced     empty: another agent attached; the shim closes
//
// A hello with resumeFrom N > 0 acknowledges every record before N and
// streams from N; resumeFrom 0 streams from the first unacknowledged
// record; N beyond the next seq is refused (bad_resume). The shim sends
// records while the bytes sent and not acknowledged stay within the window
// (at least one record always goes), so a Client buffers at most about a
// window. Every request (a write message counts once) gets exactly one
// response, in the order requests complete; writes and close_stdin
// complete in the order sent. A connection's frames are handled in order,
// so a response to a request sent after an ack reflects that ack.
//
// # Socket paths
//
// A sockaddr_un holds about 104 bytes. A longer socket path works on Linux:
// both ends then use /proc/self/fd/<open dir>/<base name>, so only the base
// name counts. Elsewhere a path longer than 103 bytes (101 for the shim,
// which binds a temporary name first) fails with ErrSocketPathTooLong. The
// socket is created with mode 0600 without a window of looser permissions
// (bound under a temporary name, chmodded, renamed into place), and a
// stale socket file is replaced. The token still authenticates every
// attachment.
//
// # Platforms
//
// Linux and darwin (and the other unixes): everything above, except long
// socket paths on non-Linux. Windows: Start, Serve and Main return
// ErrUnsupported.
package shim
