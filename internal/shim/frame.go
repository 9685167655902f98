package shim

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// frameType says what a frame's body holds. Agent → shim types have the
// high bit clear; shim → agent types have it set.
type frameType byte

// Frame types (the package documentation describes each body).
const (
	frameHello      frameType = 0x01
	frameWrite      frameType = 0x02
	frameCloseStdin frameType = 0x03
	frameSignal     frameType = 0x04
	frameStop       frameType = 0x05
	frameStatus     frameType = 0x06
	frameAck        frameType = 0x07

	frameWelcome  frameType = 0x81
	frameRefused  frameType = 0x82
	frameLine     frameType = 0x83
	frameOverlong frameType = 0x84
	frameGap      frameType = 0x85
	frameExit     frameType = 0x86
	frameResponse frameType = 0x87
	frameReplaced frameType = 0x88
)

var frameNames = map[frameType]string{
	frameHello: "hello", frameWrite: "write", frameCloseStdin: "close_stdin",
	frameSignal: "signal", frameStop: "stop", frameStatus: "status", frameAck: "ack",
	frameWelcome: "welcome", frameRefused: "refused", frameLine: "line",
	frameOverlong: "overlong", frameGap: "gap", frameExit: "exit",
	frameResponse: "response", frameReplaced: "replaced",
}

func (t frameType) String() string {
	if n, ok := frameNames[t]; ok {
		return n
	}
	return fmt.Sprintf("frame(0x%02x)", byte(t))
}

const (
	// frameHeaderLen: a big-endian uint32 body length, then the type byte.
	frameHeaderLen = 5
	// writeChunk is the most stdin bytes one write frame carries; a longer
	// Client.Write is sent as several frames, all but the last flagged
	// writeMore, and the shim assembles them before writing any.
	writeChunk = 1 << 20
	// MaxWrite is the largest Client.Write (one message to the worker).
	MaxWrite = 64 << 20
	// writeMore flags a write frame that more of the same message follows.
	writeMore = 1
	// maxControlFrame bounds every frame but line frames: all agent → shim
	// frames and the shim's control frames.
	maxControlFrame = writeChunk + 64
	// protocolVersion is the "v" of hello and welcome.
	protocolVersion = 1
)

// maxLineFrame is the largest line frame a shim with this MaxLine sends.
func maxLineFrame(maxLine int) int { return max(maxControlFrame, maxLine+8) }

// readFrame reads one frame whose body is at most limit bytes. The body is
// a fresh slice the caller owns. A clean end of stream before a header is
// io.EOF; anything else malformed is a *FrameError.
func readFrame(r io.Reader, limit int) (frameType, []byte, error) {
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, &FrameError{Reason: "truncated header"}
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	t := frameType(hdr[4])
	if uint64(n) > uint64(limit) {
		return 0, nil, &FrameError{Type: t, Reason: fmt.Sprintf("body of %d bytes exceeds %d", n, limit)}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return 0, nil, &FrameError{Type: t, Reason: "truncated body"}
		}
		return 0, nil, err
	}
	return t, body, nil
}

// frameReader reads frames like readFrame, but returns each body as a
// slice of the chunk the connection was read into instead of a fresh copy:
// the agent reads every stdout line of its workers this way, and
// allocating and filling a buffer per line (and its page faults, for long
// ones) was a large part of what reading them cost. A chunk is never
// written again where it holds a body handed out: when it is used up, the
// unfinished frame moves to a fresh chunk (sized like lineReader's), and
// the old one is collected once its bodies are.
type frameReader struct {
	r          io.Reader
	buf        []byte
	start, end int // buf[start:end] is read and not yet returned
	err        error
	longest    int // the longest frame returned from this chunk
}

func newFrameReader(r io.Reader) *frameReader { return &frameReader{r: r} }

// next reads one frame whose body is at most limit bytes. The body is the
// caller's to keep, read-only (its capacity ends with it). Errors are
// readFrame's.
func (fr *frameReader) next(limit int) (frameType, []byte, error) {
	for fr.end-fr.start < frameHeaderLen {
		if fr.err != nil {
			if fr.end > fr.start && errors.Is(fr.err, io.EOF) {
				return 0, nil, &FrameError{Reason: "truncated header"}
			}
			return 0, nil, fr.err
		}
		fr.fill(frameHeaderLen)
	}
	hdr := fr.buf[fr.start:]
	n := binary.BigEndian.Uint32(hdr[:4])
	t := frameType(hdr[4])
	if uint64(n) > uint64(limit) {
		return 0, nil, &FrameError{Type: t, Reason: fmt.Sprintf("body of %d bytes exceeds %d", n, limit)}
	}
	total := frameHeaderLen + int(n)
	for fr.end-fr.start < total {
		if fr.err != nil {
			if errors.Is(fr.err, io.EOF) {
				return 0, nil, &FrameError{Type: t, Reason: "truncated body"}
			}
			return 0, nil, fr.err
		}
		fr.fill(total)
	}
	body := fr.buf[fr.start+frameHeaderLen : fr.start+total : fr.start+total]
	fr.start += total
	fr.longest = max(fr.longest, total)
	return t, body, nil
}

// fill reads more into buf, after moving the unfinished frame (need bytes
// in all) to a fresh chunk if buf cannot hold it or has too little room.
func (fr *frameReader) fill(need int) {
	if len(fr.buf)-fr.start < need || len(fr.buf)-fr.end < minRead {
		pending := fr.end - fr.start
		fresh := make([]byte, max(readChunk, min(8*fr.longest, maxChunk), need+minRead))
		copy(fresh, fr.buf[fr.start:fr.end])
		fr.buf, fr.start, fr.end, fr.longest = fresh, 0, pending, 0
	}
	n, err := fr.r.Read(fr.buf[fr.end:])
	fr.end += n
	if err != nil {
		fr.err = err
	}
}

// frameWriter serialises frames from several goroutines onto one
// connection. Small frames are coalesced in the buffer until a flush.
type frameWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

// write sends one frame whose body is prefix followed by data.
func (fw *frameWriter) write(t frameType, prefix, data []byte, flush bool) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.writeLocked(t, prefix, data, flush)
}

func (fw *frameWriter) writeLocked(t frameType, prefix, data []byte, flush bool) error {
	// The header is built in the writer's own buffer (a header array
	// handed to Write escaped: an allocation per frame).
	hdr := fw.w.AvailableBuffer()
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(len(prefix)+len(data)))
	hdr = append(hdr, byte(t))
	hdr = append(hdr, prefix...)
	fw.w.Write(hdr)
	if _, err := fw.w.Write(data); err != nil {
		return err
	}
	if flush {
		return fw.w.Flush()
	}
	return nil
}

// writeSeq sends one frame whose body is seq followed by data (a line),
// without allocating the prefix.
func (fw *frameWriter) writeSeq(t frameType, seq uint64, data []byte, flush bool) error {
	var prefix [8]byte
	binary.BigEndian.PutUint64(prefix[:], seq)
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.writeLocked(t, prefix[:], data, flush)
}

// writeJSON sends one frame whose body is prefix followed by v as JSON.
func (fw *frameWriter) writeJSON(t frameType, prefix []byte, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return fw.write(t, prefix, body, true)
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// The JSON bodies.

type helloMsg struct {
	V          int    `json:"v"`
	InstanceID string `json:"instanceId"`
	Token      string `json:"token"`
	ResumeFrom uint64 `json:"resumeFrom,omitempty"`
}

type welcomeMsg struct {
	V       int    `json:"v"`
	MaxLine int    `json:"maxLine"`
	Window  int    `json:"window"`
	Status  Status `json:"status"`
}

type signalMsg struct {
	Signal Signal `json:"signal"`
}

type stopMsg struct {
	CloseStdin bool  `json:"closeStdin,omitempty"`
	GraceMs    int64 `json:"graceMs"`
}

func (m stopMsg) grace() time.Duration { return time.Duration(m.GraceMs) * time.Millisecond }

type responseMsg struct {
	Error  *RemoteError `json:"error,omitempty"`
	Status *Status      `json:"status,omitempty"`
}

// agentFrame is a decoded agent → shim frame.
type agentFrame struct {
	typ    frameType
	req    uint32 // request frames
	hello  helloMsg
	data   []byte // write
	more   bool   // write: more of the message follows
	signal Signal
	stop   stopMsg
	ack    uint64
}

// decodeAgentFrame parses the body of an agent → shim frame.
func decodeAgentFrame(t frameType, body []byte) (agentFrame, error) {
	f := agentFrame{typ: t}
	bad := func(reason string) (agentFrame, error) {
		return agentFrame{}, &FrameError{Type: t, Reason: reason}
	}
	switch t {
	case frameHello:
		if err := json.Unmarshal(body, &f.hello); err != nil {
			return bad(err.Error())
		}
		return f, nil
	case frameAck:
		if len(body) != 8 {
			return bad("body is not a uint64")
		}
		f.ack = binary.BigEndian.Uint64(body)
		return f, nil
	case frameWrite, frameCloseStdin, frameSignal, frameStop, frameStatus:
	default:
		return bad("not an agent frame")
	}
	if len(body) < 4 {
		return bad("missing request id")
	}
	f.req = binary.BigEndian.Uint32(body)
	rest := body[4:]
	switch t {
	case frameWrite:
		if len(rest) < 1 || rest[0]&^writeMore != 0 {
			return bad("missing or unknown flags")
		}
		f.more = rest[0]&writeMore != 0
		f.data = rest[1:]
	case frameCloseStdin, frameStatus:
		if len(rest) != 0 {
			return bad("unexpected body")
		}
	case frameSignal:
		var m signalMsg
		if err := json.Unmarshal(rest, &m); err != nil {
			return bad(err.Error())
		}
		if _, ok := requestSignals[m.Signal]; !ok {
			return bad(fmt.Sprintf("signal %q is not one of TERM, KILL, INT, HUP", m.Signal))
		}
		f.signal = m.Signal
	case frameStop:
		if err := json.Unmarshal(rest, &f.stop); err != nil {
			return bad(err.Error())
		}
		if f.stop.GraceMs < 0 {
			return bad("negative grace")
		}
	}
	return f, nil
}

// shimFrame is a decoded shim → agent frame.
type shimFrame struct {
	typ      frameType
	seq      uint64 // line, overlong, exit
	data     []byte // line
	overlong int64
	gap      GapError
	req      uint32
	// The rare, larger bodies stay out of line so that a line frame is small.
	exit     *ExitStatus
	welcome  *welcomeMsg
	refused  *RemoteError
	response *responseMsg
}

// decodeShimFrame parses the body of a shim → agent frame.
func decodeShimFrame(t frameType, body []byte) (shimFrame, error) {
	f := shimFrame{typ: t}
	bad := func(reason string) (shimFrame, error) {
		return shimFrame{}, &FrameError{Type: t, Reason: reason}
	}
	switch t {
	case frameWelcome:
		f.welcome = new(welcomeMsg)
		if err := json.Unmarshal(body, f.welcome); err != nil {
			return bad(err.Error())
		}
		if f.welcome.MaxLine <= 0 || f.welcome.MaxLine > maxMaxLine {
			return bad("maxLine out of range")
		}
	case frameRefused:
		f.refused = new(RemoteError)
		if err := json.Unmarshal(body, f.refused); err != nil {
			return bad(err.Error())
		}
		if f.refused.Code == "" {
			return bad("refusal without a code")
		}
	case frameLine, frameOverlong, frameExit:
		if len(body) < 8 {
			return bad("missing seq")
		}
		if f.seq = binary.BigEndian.Uint64(body); f.seq == 0 {
			return bad("seq 0")
		}
		rest := body[8:]
		switch t {
		case frameLine:
			f.data = rest
		case frameOverlong:
			if len(rest) != 8 {
				return bad("length is not a uint64")
			}
			n := binary.BigEndian.Uint64(rest)
			if n == 0 || n > 1<<62 {
				return bad("length out of range")
			}
			f.overlong = int64(n)
		case frameExit:
			f.exit = new(ExitStatus)
			if err := json.Unmarshal(rest, f.exit); err != nil {
				return bad(err.Error())
			}
		}
	case frameGap:
		if len(body) != 16 {
			return bad("body is not two uint64")
		}
		f.gap = GapError{From: binary.BigEndian.Uint64(body), To: binary.BigEndian.Uint64(body[8:])}
		if f.gap.From == 0 || f.gap.From >= f.gap.To {
			return bad(fmt.Sprintf("empty or inverted range %d..%d", f.gap.From, f.gap.To))
		}
	case frameResponse:
		if len(body) < 4 {
			return bad("missing request id")
		}
		f.req = binary.BigEndian.Uint32(body)
		f.response = new(responseMsg)
		if err := json.Unmarshal(body[4:], f.response); err != nil {
			return bad(err.Error())
		}
	case frameReplaced:
		if len(body) != 0 {
			return bad("unexpected body")
		}
	default:
		return bad("not a shim frame")
	}
	return f, nil
}
