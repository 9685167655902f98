// Package rawio reads and writes a non-blocking descriptor (a socket, a
// pipe) with raw system calls, waiting through the Go runtime's poller as
// net.Conn and os.File do.
//
// Why: a plain Read or Write enters the scheduler's system-call path, and
// the first one after the process was idle wakes the runtime's monitor
// thread. A process that does little per call — a relay passing lines
// on, a server reading one heartbeat from each of 10,000 idle
// connections — spends a large share of its CPU on those wakeups and on
// the bookkeeping around each call. The descriptors are non-blocking, so
// a raw call never holds a P for long.
//
// New returns nil where raw calls are not available (another system than
// Linux, a blocking descriptor); callers then use the descriptor as it is.
// Errors keep the shape the plain calls give: a socket's are *net.OpError
// (io.EOF at the end of the stream), a file's *os.PathError, and closed
// descriptors and deadlines match net.ErrClosed, os.ErrClosed and
// os.ErrDeadlineExceeded.
package rawio
