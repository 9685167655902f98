//go:build unix

package shim

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/internal/fifo"
	"example.com/pifleet/internal/rawio"
)

// Serve runs a shim in the calling process: it listens on cfg.Socket,
// starts the worker, relays its output to the attached agent and carries
// out the agent's requests. It returns nil once it has finished serving:
// the exit was acknowledged, or Linger passed with nobody attached after
// the worker exited, or ctx was cancelled (the worker's process group then
// gets SIGTERM, and SIGKILL after KillGrace; an attached agent gets
// DrainTimeout to acknowledge the exit record). Errors before the worker
// started are returned (see errorCode); nothing is left behind then.
//
// The shim binary calls it through Main; tests may call it directly.
func Serve(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	s := &server{
		cfg:          cfg,
		log:          cfg.Logger,
		backlog:      newBacklog(cfg.BufferBytes),
		conns:        make(map[net.Conn]struct{}),
		finished:     make(chan struct{}),
		exitRecorded: make(chan struct{}),
	}
	ln, sockInfo, err := listenSocket(cfg.Socket)
	if err != nil {
		return fmt.Errorf("shim: listen on %s: %w", cfg.Socket, err)
	}
	s.ln, s.sockInfo = ln, sockInfo
	w, err := startWorker(cfg)
	if err != nil {
		ln.Close()
		removeSocket(cfg.Socket, sockInfo)
		return &codedError{CodeSpawn, fmt.Errorf("shim: start worker %q: %w", cfg.Command[0], err)}
	}
	s.w = w
	s.stdin = newStdinQueue(w.stdin, w.stdinRaw)
	s.startedAt = cfg.Now()
	s.log.Info().Int("workerPid", w.pid()).Int("pgid", w.pgid).Str("socket", cfg.Socket).Msg("worker started")
	if cfg.OnReady != nil {
		cfg.OnReady(Ready{ShimPID: os.Getpid(), WorkerPID: w.pid(), PGID: w.pgid})
	}

	stdoutDone, stderrDone := make(chan struct{}), make(chan struct{})
	s.goTracked(s.acceptLoop)
	s.goTracked(s.stdin.run)
	s.goTracked(func() { s.readStdout(stdoutDone) })
	s.goTracked(func() { s.readStderr(stderrDone) })
	s.goTracked(func() { s.awaitExit(stdoutDone, stderrDone) })

	select {
	case <-s.finished:
	case <-ctx.Done():
		s.log.Info().Msg("told to stop: ending the worker")
		s.escalate(0, cfg.KillGrace)
		<-s.exitRecorded
		// An attached agent gets DrainTimeout to take the exit record.
		s.mu.Lock()
		attached := s.attached != nil
		s.mu.Unlock()
		if attached {
			t := time.NewTimer(cfg.DrainTimeout)
			select {
			case <-s.finished:
			case <-t.C:
			}
			t.Stop()
		}
		s.finish()
	}
	s.shutdown()
	return nil
}

// codedError carries the readiness error code of a startup failure.
type codedError struct {
	code string
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// errorCode is the error code a shim reports for a Serve error.
func errorCode(err error) string {
	var ce *codedError
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, ErrInvalidConfig):
		return CodeConfig
	case errors.Is(err, ErrSocketInUse):
		return CodeSocketInUse
	case errors.Is(err, ErrSocketPathTooLong):
		return CodeSocketPath
	}
	return CodeListen
}

// remoteError turns the error of a request into what the response carries.
func remoteError(err error) *RemoteError {
	code := CodeBadRequest
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrExited):
		code = CodeExited
	case errors.Is(err, ErrStdinClosed):
		code = CodeStdinClosed
	case errors.Is(err, ErrBusy):
		code = CodeBusy
	}
	return &RemoteError{Code: code, Message: err.Error()}
}

type server struct {
	cfg       Config
	log       zerolog.Logger
	ln        *net.UnixListener
	sockInfo  os.FileInfo
	w         *worker
	stdin     *stdinQueue
	startedAt time.Time
	wg        sync.WaitGroup

	finishOnce   sync.Once
	finished     chan struct{} // closed when the shim should shut down
	exitRecorded chan struct{} // closed once the exit record is in the backlog

	mu       sync.Mutex
	backlog  *backlog
	attached *session
	conns    map[net.Conn]struct{} // every open connection, closed at shutdown
	tail     tailBuffer
	exit     *ExitStatus
	exitSeq  uint64
	linger   *time.Timer
	stopping bool
}

func (s *server) goTracked(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

func (s *server) finish() { s.finishOnce.Do(func() { close(s.finished) }) }

// shutdown stops listening, removes the socket and closes every
// connection, then waits for every goroutine of the shim.
func (s *server) shutdown() {
	s.ln.Close()
	removeSocket(s.cfg.Socket, s.sockInfo)
	s.mu.Lock()
	if s.linger != nil {
		s.linger.Stop()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.log.Info().Msg("shim finished")
}

// relayConn is a descriptor the shim relays through: the worker's stdout,
// an agent's socket.
type relayConn interface {
	syscall.Conn
	io.ReadWriter
}

// relayIO is c, read and written raw where that works (see rawio: the
// relay does little per call, and the runtime's monitor thread, woken by
// plain calls, took a quarter of the shim's CPU on a streamed answer).
func relayIO(c relayConn) io.ReadWriter {
	if r := rawio.New(c); r != nil {
		return r
	}
	return c
}

// readStdout turns the worker's stdout into line records.
func (s *server) readStdout(done chan<- struct{}) {
	defer close(done)
	lr := newRecyclingLineReader(relayIO(s.w.stdout), s.cfg.MaxLine, newChunkPool())
	for {
		line, overlong, err := lr.next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				s.log.Warn().Err(err).Msg("reading worker stdout")
			}
			return
		}
		var rec record
		if overlong > 0 {
			rec = record{kind: recordOverlong, overlong: overlong}
			s.log.Warn().Int64("bytes", overlong).Msg("dropped an overlong stdout line")
		} else {
			rec = record{kind: recordLine, data: line, chunk: lr.retain()}
		}
		s.appendRecord(rec)
	}
}

// readStderr keeps the tail of the worker's stderr.
func (s *server) readStderr(done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 4096)
	for {
		n, err := s.w.stderr.Read(buf)
		if n > 0 {
			s.mu.Lock()
			s.tail.write(buf[:n])
			s.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (s *server) appendRecord(rec record) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := s.backlog.append(rec)
	if s.attached != nil {
		s.attached.notify()
	}
	return seq
}

// awaitExit records the worker's exit after its last output line.
func (s *server) awaitExit(stdoutDone, stderrDone <-chan struct{}) {
	state := s.w.wait()
	s.stdin.stop()
	// The group is swept, so the pipes reach EOF unless something that left
	// the group still holds them; do not wait for that forever.
	drained := time.NewTimer(s.cfg.DrainTimeout)
	for _, done := range []<-chan struct{}{stdoutDone, stderrDone} {
		select {
		case <-done:
		case <-drained.C:
			s.log.Warn().Msg("worker output still open after its exit; closing it")
			s.w.stdout.Close()
			s.w.stderr.Close()
			<-done
		}
	}
	drained.Stop()
	s.w.stdout.Close()
	s.w.stderr.Close()

	exit := exitStatus(state)
	exit.ExitedAt = s.cfg.Now()
	s.mu.Lock()
	exit.StderrTail = s.tail.String()
	s.exit = &exit
	s.exitSeq = s.backlog.append(record{kind: recordExit, exit: &exit})
	if s.attached != nil {
		s.attached.notify()
	} else {
		s.armLingerLocked()
	}
	s.mu.Unlock()
	s.log.Info().Stringer("exit", exit).Uint64("seq", s.exitSeq).Msg("worker exited")
	close(s.exitRecorded)
}

// armLingerLocked gives an exited worker's shim Linger to be attached.
func (s *server) armLingerLocked() {
	if s.linger != nil {
		s.linger.Stop()
	}
	s.linger = time.AfterFunc(s.cfg.Linger, func() {
		s.mu.Lock()
		idle := s.attached == nil
		s.mu.Unlock()
		if idle {
			s.log.Warn().Dur("linger", s.cfg.Linger).Msg("nobody acknowledged the exit in time; giving up")
			s.finish()
		}
	})
}

// stop ends the worker: close its stdin if asked, SIGTERM its group after
// termAfter, SIGKILL after killAfter more, unless it exits first. The
// policy (abort first, how long to wait) is the agent's.
func (s *server) stop(closeStdin bool, termAfter, killAfter time.Duration) error {
	s.mu.Lock()
	if s.exit != nil {
		s.mu.Unlock()
		return ErrExited
	}
	already := s.stopping
	s.stopping = true
	s.mu.Unlock()
	if closeStdin {
		s.stdin.close(nil)
	}
	if !already {
		s.escalate(termAfter, killAfter)
	}
	return nil
}

// escalate sends SIGTERM to the worker's group after termAfter and SIGKILL
// after killAfter more, unless the worker exits first.
func (s *server) escalate(termAfter, killAfter time.Duration) {
	s.goTracked(func() {
		for _, step := range []struct {
			after time.Duration
			sig   Signal
		}{{termAfter, SignalTerm}, {killAfter, SignalKill}} {
			t := time.NewTimer(step.after)
			select {
			case <-s.w.exited:
				t.Stop()
				return
			case <-t.C:
			}
			s.log.Info().Str("signal", string(step.sig)).Msg("stopping the worker")
			if err := s.w.signal(step.sig); err != nil {
				return
			}
		}
	})
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *server) statusLocked() Status {
	return Status{
		InstanceID:    s.cfg.InstanceID,
		ShimPID:       os.Getpid(),
		WorkerPID:     s.w.pid(),
		PGID:          s.w.pgid,
		StartedAt:     s.startedAt,
		Running:       s.exit == nil,
		Exit:          s.exit,
		StdinClosed:   s.stdin.isClosed(),
		StderrTail:    s.tail.String(),
		NextSeq:       s.backlog.nextSeq,
		FirstSeq:      s.backlog.first(),
		AckedThrough:  s.backlog.ackedThrough,
		DroppedLines:  s.backlog.dropped,
		BufferedBytes: s.backlog.bytes,
	}
}

func (s *server) acceptLoop() {
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error().Err(err).Msg("accept")
			}
			return
		}
		s.mu.Lock()
		select {
		case <-s.finished:
			s.mu.Unlock()
			conn.Close()
			continue
		default:
		}
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		s.goTracked(func() { s.serveConn(conn) })
	}
}

// serveConn runs one connection: handshake, then requests until it ends.
func (s *server) serveConn(conn *net.UnixConn) {
	defer func() {
		conn.Close()
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
	}()
	rw := relayIO(conn)
	out := newFrameWriter(rw)
	br := bufio.NewReaderSize(rw, 64<<10)
	conn.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	t, body, err := readFrame(br, maxControlFrame)
	if err != nil {
		s.log.Debug().Err(err).Msg("connection ended before its hello")
		return
	}
	f, err := decodeAgentFrame(t, body)
	if err == nil && t != frameHello {
		err = &FrameError{Type: t, Reason: "the first frame must be hello"}
	}
	if err != nil {
		out.writeJSON(frameRefused, nil, RemoteError{Code: CodeBadRequest, Message: err.Error()})
		return
	}
	conn.SetReadDeadline(time.Time{})
	ss := &session{s: s, conn: conn, out: out, wake: make(chan struct{}, 1), done: make(chan struct{})}
	welcome, old, refusal := s.attach(ss, f.hello)
	if refusal != nil {
		s.log.Warn().Str("code", refusal.Code).Msg("refused an attach: " + refusal.Message)
		out.writeJSON(frameRefused, nil, refusal)
		return
	}
	if err := out.writeJSON(frameWelcome, nil, welcome); err != nil {
		// The hello of an agent killed right after it connected can still
		// be read, but its welcome cannot be sent: the agent it replaced
		// (one stopping the worker, say) stays attached, and is told
		// nothing.
		s.log.Warn().Err(err).Msg(staleAttachMessage)
		s.reinstate(ss, old)
		return
	}
	if old != nil {
		s.goTracked(func() { old.closeWith(frameReplaced) })
	}
	s.log.Info().Uint64("resumeFrom", f.hello.ResumeFrom).Msg("agent attached")
	s.goTracked(ss.writeLoop)
	ss.readLoop(br)
	ss.close()
	s.detach(ss)
}

// attach checks a hello and makes ss the attached session, returning the
// session it replaces.
func (s *server) attach(ss *session, h helloMsg) (welcomeMsg, *session, *RemoteError) {
	switch {
	case h.V != protocolVersion:
		return welcomeMsg{}, nil, &RemoteError{CodeVersion, fmt.Sprintf("protocol version %d, this shim speaks %d", h.V, protocolVersion)}
	case h.InstanceID != s.cfg.InstanceID:
		return welcomeMsg{}, nil, &RemoteError{CodeWrongInstance, fmt.Sprintf("this shim serves instance %q, not %q", s.cfg.InstanceID, h.InstanceID)}
	case subtle.ConstantTimeCompare([]byte(h.Token), []byte(s.cfg.Token)) != 1:
		return welcomeMsg{}, nil, &RemoteError{CodeBadToken, "token mismatch"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.ResumeFrom > s.backlog.nextSeq {
		return welcomeMsg{}, nil, &RemoteError{CodeBadResume, fmt.Sprintf("resumeFrom %d is beyond the next seq %d", h.ResumeFrom, s.backlog.nextSeq)}
	}
	old := s.attached
	s.attached = ss
	if s.linger != nil {
		s.linger.Stop()
	}
	if h.ResumeFrom > 0 {
		// Resuming from N says everything before N was handled.
		s.ackLocked(ss, h.ResumeFrom-1)
		ss.cursor = h.ResumeFrom
	} else {
		ss.cursor = s.backlog.ackedThrough + 1
	}
	return welcomeMsg{V: protocolVersion, MaxLine: s.cfg.MaxLine, Window: s.cfg.Window, Status: s.statusLocked()}, old, nil
}

// staleAttachMessage is logged for an attach whose agent was gone before
// its welcome could be sent.
const staleAttachMessage = "an agent gone before its welcome was not attached"

// reinstate gives the attachment back to old, the session ss replaced, if
// ss still holds it.
func (s *server) reinstate(ss, old *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attached != ss {
		return
	}
	s.attached = old
	switch {
	case old != nil:
		old.notify() // records appended meanwhile woke ss
	case s.exit != nil:
		s.armLingerLocked()
	}
}

// detach forgets ss if it is still the attached session.
func (s *server) detach(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attached != ss {
		return
	}
	s.attached = nil
	s.log.Info().Msg("agent detached")
	if s.exit != nil {
		s.armLingerLocked()
	}
}

// ackLocked discards records through seq; acknowledging the exit record
// finishes the shim.
func (s *server) ackLocked(ss *session, seq uint64) {
	s.backlog.ack(seq)
	ss.acked(seq)
	if s.exitSeq != 0 && s.backlog.ackedThrough >= s.exitSeq {
		s.finish()
	}
}

// session is one authenticated agent connection.
type session struct {
	s         *server
	conn      net.Conn
	out       *frameWriter
	wake      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	// Guarded by s.mu.
	cursor   uint64              // next seq to send
	inflight int                 // bytes sent and not yet acknowledged
	sent     fifo.Queue[sentRec] // what inflight is made of, in seq order
}

type sentRec struct {
	seq  uint64
	size int
}

func (ss *session) notify() {
	select {
	case ss.wake <- struct{}{}:
	default:
	}
}

func (ss *session) close() {
	ss.closeOnce.Do(func() {
		close(ss.done)
		ss.conn.Close()
	})
}

// closeWith says goodbye with a frame, then closes. A stuck peer gets a
// second before the connection is closed anyway.
func (ss *session) closeWith(t frameType) {
	ss.conn.SetWriteDeadline(time.Now().Add(time.Second))
	ss.out.write(t, nil, nil, true)
	ss.close()
}

// acked releases the window for records through seq. Caller holds s.mu.
func (ss *session) acked(seq uint64) {
	released := false
	for ss.sent.Len() > 0 && ss.sent.At(0).seq <= seq {
		ss.inflight -= ss.sent.Pop().size
		released = true
	}
	if released {
		if ss.cursor < ss.s.backlog.nextSeq {
			// Records wait that the window may have held back. (Without
			// any, waking the writer would only put it back to sleep, at
			// every ack.)
			ss.notify()
		}
	}
}

// batchRecords bounds the records sent between two flushes.
const batchRecords = 128

// writeLoop sends the stream from the session's cursor: a gap when records
// it should have sent were dropped, then records while the window allows.
func (ss *session) writeLoop() {
	defer ss.close()
	s := ss.s
	batch := make([]record, 0, batchRecords)
	for {
		s.mu.Lock()
		gap, hasGap := s.backlog.missing(ss.cursor)
		ss.cursor = max(ss.cursor, s.backlog.first())
		batch = batch[:0]
		for len(batch) < batchRecords {
			rec, ok := s.backlog.get(ss.cursor)
			if !ok || (ss.inflight > 0 && ss.inflight+rec.size() > s.cfg.Window) {
				break
			}
			// The batch is sent without the lock: it keeps the chunks of
			// its lines from being reused meanwhile (an ack or a drop may
			// release them in the backlog).
			rec.chunk.retain()
			batch = append(batch, rec)
			ss.sent.Push(sentRec{rec.seq, rec.size()})
			ss.inflight += rec.size()
			ss.cursor++
		}
		s.mu.Unlock()

		if hasGap {
			s.log.Warn().Uint64("from", gap.From).Uint64("to", gap.To).Msg("stdout lines lost to buffer overflow")
			if ss.out.write(frameGap, append(u64(gap.From), u64(gap.To)...), nil, len(batch) == 0) != nil {
				releaseAll(batch)
				return
			}
		}
		if ss.sendBatch(batch) != nil {
			return
		}
		if !hasGap && len(batch) == 0 {
			select {
			case <-ss.wake:
			case <-ss.done:
				return
			}
		}
	}
}

// sendBatch sends the batch, flushing after its last record, and lets go
// of its chunks.
func (ss *session) sendBatch(batch []record) error {
	defer releaseAll(batch)
	for i, rec := range batch {
		if err := ss.send(rec, i == len(batch)-1); err != nil {
			return err
		}
	}
	return nil
}

// releaseAll lets go of the chunks of a batch that writeLoop retained.
func releaseAll(batch []record) {
	for i := range batch {
		batch[i].chunk.release()
		batch[i] = record{}
	}
}

func (ss *session) send(rec record, flush bool) error {
	switch rec.kind {
	case recordLine:
		return ss.out.writeSeq(frameLine, rec.seq, rec.data, flush)
	case recordOverlong:
		return ss.out.write(frameOverlong, append(u64(rec.seq), u64(uint64(rec.overlong))...), nil, flush)
	default:
		return ss.out.writeJSON(frameExit, u64(rec.seq), rec.exit)
	}
}

// readLoop carries out the agent's requests until the connection ends.
func (ss *session) readLoop(br *bufio.Reader) {
	s := ss.s
	var message []byte // a write message being assembled from its chunks
	for {
		t, body, err := readFrame(br, maxControlFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Warn().Err(err).Msg("agent connection")
			}
			return
		}
		f, err := decodeAgentFrame(t, body)
		if err != nil {
			s.log.Warn().Err(err).Msg("bad frame from agent; closing the connection")
			return
		}
		switch f.typ {
		case frameWrite:
			// Chunks of one message are assembled first, so that the worker
			// never sees part of a message whose connection dropped.
			if f.more || message != nil {
				if len(message)+len(f.data) > MaxWrite {
					s.log.Warn().Msg("agent sent a message over MaxWrite; closing the connection")
					return
				}
				message = append(message, f.data...)
				if f.more {
					continue
				}
				f.data, message = message, nil
			}
			if err := s.stdin.write(f.data, ss.responder(f.req)); err != nil {
				ss.respond(f.req, err, nil)
			}
		case frameCloseStdin:
			if err := s.stdin.close(ss.responder(f.req)); err != nil {
				ss.respond(f.req, err, nil)
			}
		case frameSignal:
			s.log.Info().Str("signal", string(f.signal)).Msg("signalling the worker's process group")
			ss.respond(f.req, s.w.signal(f.signal), nil)
		case frameStop:
			ss.respond(f.req, s.stop(f.stop.CloseStdin, f.stop.grace(), f.stop.grace()), nil)
		case frameStatus:
			st := s.status()
			ss.respond(f.req, nil, &st)
		case frameAck:
			s.mu.Lock()
			s.ackLocked(ss, f.ack)
			s.mu.Unlock()
		default:
			s.log.Warn().Stringer("frame", f.typ).Msg("unexpected frame from agent; closing the connection")
			return
		}
	}
}

func (ss *session) responder(req uint32) func(error) {
	return func(err error) { ss.respond(req, err, nil) }
}

// respond answers a request. A connection that has gone cannot be
// answered; that is not an error of the request.
func (ss *session) respond(req uint32, err error, st *Status) {
	if err == nil && st == nil {
		// Every write is answered so: spare it the encoder.
		ss.out.write(frameResponse, u32(req), emptyResponse, true)
		return
	}
	ss.out.writeJSON(frameResponse, u32(req), responseMsg{Error: remoteError(err), Status: st})
}

// emptyResponse is the JSON of responseMsg{}.
var emptyResponse = []byte("{}")

// tailBuffer keeps the last StderrTailBytes bytes written to it.
type tailBuffer struct {
	buf []byte
}

func (t *tailBuffer) write(p []byte) {
	if len(p) >= StderrTailBytes {
		t.buf = append(t.buf[:0], p[len(p)-StderrTailBytes:]...)
		return
	}
	if over := len(t.buf) + len(p) - StderrTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
}

// String is the tail as text, with invalid UTF-8 (a rune cut at the start,
// binary noise) replaced.
func (t *tailBuffer) String() string { return strings.ToValidUTF8(string(t.buf), "\uFFFD") }
