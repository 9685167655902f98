package transport

import (
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
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
	s := encoders.Get().(*Schema)
	defer encoders.Put(s)
	start := len(dst)
	s.buf, s.comma, s.encErr, s.frameType = dst, false, nil, f.FrameType()
	h := f.Envelope()
	s.buf = append(s.buf, `{"v":1,"type":`...)
	s.buf = appendString(s.buf, s.frameType)
	s.comma = true
	if h.ID != "" {
		s.key("id")
		s.buf = appendString(s.buf, h.ID)
	}
	if h.TraceID != "" {
		s.key("traceId")
		s.buf = appendString(s.buf, h.TraceID)
	}
	f.Schema(s)
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

var encoders = sync.Pool{New: func() any { return &Schema{encoding: true} }}

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

// appendString appends s as a JSON string, escaped the way JSON.stringify
// does it: quote, backslash and control characters are escaped (with the
// short forms \b \f \n \r \t), everything else, U+2028 and U+2029
// included, is written as UTF-8. Invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Fast path: jump 8 bytes at a time to the next byte that needs a
		// look (escape or non-ASCII).
		if i+8 <= len(s) {
			x := load64(s, i)
			m := specialMask(x) | x&swarHigh
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendFloat appends f the way JavaScript prints numbers in JSON: no
// exponent between 1e-6 and 1e21, shortest round-trip digits, and -0 as 0.
func appendFloat(dst []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// strconv writes e-07; JavaScript writes e-7.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// load64 reads s[i:i+8] as a little-endian word; the compiler turns the
// shifts into one load.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
