package transport

import (
	"io"
	"slices"
	"strconv"
	"sync"

	"example.com/pifleet/internal/jsjson"
)

// AppendFrame appends f as one JSON object followed by LF to dst and
// returns the extended slice. It allocates nothing when dst has room.
//
// Like the TypeScript encoder it does no schema validation: the frame is
// written as the Go value says. It fails with a *ProtocolError of code
// CodeFrameTooLarge when the JSON text plus LF exceeds MaxFrameBytes, and
// with an *EncodeError when a raw field is not valid JSON or a number is
// NaN or infinite. On error dst is returned unchanged in length.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	s := encoders.Get().(*schema)
	defer encoders.Put(s)
	start := len(dst)
	s.buf, s.comma, s.encErr, s.frameType = dst, false, nil, f.FrameType()
	h := f.Envelope()
	s.buf = append(s.buf, `{"v":1,"type":`...)
	s.buf = jsjson.AppendString(s.buf, s.frameType)
	s.comma = true
	if h.ID != "" {
		s.key("id")
		s.buf = jsjson.AppendString(s.buf, h.ID)
	}
	if h.TraceID != "" {
		s.key("traceId")
		s.buf = jsjson.AppendString(s.buf, h.TraceID)
	}
	f.schema(s)
	s.buf = append(s.buf, '}', '\n')
	out := s.buf
	s.buf = nil
	if s.encErr != nil {
		return out[:start], s.encErr
	}
	if n := len(out) - start; n > MaxFrameBytes {
		return out[:start], &ProtocolError{
			Code:      CodeFrameTooLarge,
			Message:   "frame too large: " + strconv.Itoa(n) + " bytes with LF (max " + strconv.Itoa(MaxFrameBytes) + ")",
			FrameType: s.frameType,
		}
	}
	return out, nil
}

var encoders = sync.Pool{New: func() any { return &schema{encoding: true} }}

// MarshalFrame returns f as one JSON object followed by LF.
func MarshalFrame(f Frame) ([]byte, error) {
	return AppendFrame(nil, f)
}

// Encoder writes frames to a stream, one Write per frame.
type Encoder struct {
	w   io.Writer
	buf []byte
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Encode writes f and its LF. Nothing is written when f cannot be encoded.
func (e *Encoder) Encode(f Frame) error {
	var err error
	if e.buf, err = AppendFrame(e.buf[:0], f); err != nil {
		return err
	}
	_, err = e.w.Write(e.buf)
	return err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
