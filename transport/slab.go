package transport

// Decoding a frame used to cost two heap allocations of its own: the frame
// struct and the copy of its raw values (an event's payload). At a million
// frames a second, malloc was a sixth of the decoder's time. A decoding
// schema therefore carves both from blocks it allocates a few at a time:
// one malloc then serves many frames.
//
// The price is retention: a frame, or a raw value, kept alive keeps its
// whole block alive (at most rawBlock bytes, or frameBlock structs of its
// type), and a decoder keeps the rest of its current blocks. The codec's
// own callers hand frames on and drop them, and a program that stores a
// few frames for long is not hurt by a few KiB. A server with 10,000
// connections is, if each holds blocks of 16 for frames it decodes once
// or ten times (a hello, a spawn's answers): so the blocks of each frame
// type, and of raw values, start small and double up to their size, and
// only a stream of many frames gets the full ones.

const (
	// rawBlock is the size of the blocks raw values are copied into, once
	// a decoder has filled smaller ones: its first is rawMax bytes, each
	// next twice the last.
	rawBlock = 4 << 10
	// rawMax is the largest raw value copied into a block; longer ones get
	// an allocation of their own, so a block wastes less than rawMax bytes.
	rawMax = 512
	// frameBlock is how many frame structs of one type are allocated at
	// once, once a decoder has used up smaller blocks of that type: its
	// first holds one, each next twice as many.
	frameBlock = 16
)

// rawArena hands out copies of raw values.
type rawArena struct {
	free []byte // the unused rest of the current block
	size int    // the size of the current block
}

// clone returns a copy of v whose capacity is its length, so that an
// append by the caller reallocates instead of writing into a neighbour.
func (a *rawArena) clone(v []byte) []byte {
	if len(v) > rawMax {
		out := make([]byte, len(v))
		copy(out, v)
		return out
	}
	if len(v) > len(a.free) {
		a.size = min(max(2*a.size, rawMax), rawBlock)
		a.free = make([]byte, a.size)
	}
	out := a.free[:len(v):len(v)]
	a.free = a.free[len(v):]
	copy(out, v)
	return out
}

// frameSlabs holds, per frame type (indexed by frameKind.index), the
// constructor that hands out its current block of fresh structs.
type frameSlabs []func() Frame

// take returns a zero frame of kind k.
func (fs *frameSlabs) take(k frameKind) Frame {
	if *fs == nil {
		*fs = make(frameSlabs, len(frameKinds))
	}
	next := (*fs)[k.index]
	if next == nil {
		next = k.slab()
		(*fs)[k.index] = next
	}
	return next()
}

// slabOf returns a constructor of T frames that allocates them in blocks
// of 1, 2, 4 … up to frameBlock.
func slabOf[T any, P interface {
	*T
	Frame
}]() func() Frame {
	var block []T
	size := 1
	return func() Frame {
		if len(block) == 0 {
			block = make([]T, size)
			size = min(2*size, frameBlock)
		}
		f := P(&block[0])
		block = block[1:]
		return f
	}
}
