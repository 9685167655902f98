package boltfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
)

// The on-disk layout of a bbolt file (format version 2), as far as
// checkPages needs it. bbolt trusts its file: a page id past the end of
// the file, an element offset past its page, or a branch that points back
// at its parent makes it fault, panic or recurse forever while reading.
// checkPages reads the file itself, with every offset checked, before
// bbolt maps it, so that bbolt is only ever given a file whose page
// structure holds together.
const (
	pageHeaderSize  = 16 // id u64, flags u16, count u16, overflow u32
	elementSize     = 16 // branch: pos u32, ksize u32, pgid u64; leaf: flags u32, pos u32, ksize u32, vsize u32
	bucketHeader    = 16 // root pgid u64, sequence u64
	metaSize        = 64 // magic, version, pageSize, flags u32; root bucket; freelist, pgid, txid, checksum u64
	metaChecksumEnd = 56 // the checksum covers the meta up to itself

	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	metaPageFlag     = 0x04
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01

	boltMagic   = 0xED0CDAED
	boltVersion = 2

	noFreelist = ^uint64(0)

	// maxDepth bounds the B+tree depth (nested buckets included): bbolt's
	// trees are a handful of levels deep; a deeper one is a loop.
	maxDepth = 64
)

type meta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) exist
	txid     uint64
}

// parseMeta decodes the meta page at b (the page header first). ok is
// false when its magic, version or checksum is wrong.
func parseMeta(b []byte) (meta, bool) {
	if len(b) < pageHeaderSize+metaSize {
		return meta{}, false
	}
	if binary.LittleEndian.Uint16(b[8:]) != metaPageFlag {
		return meta{}, false
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	h := fnv.New64a()
	h.Write(m[:metaChecksumEnd])
	if binary.LittleEndian.Uint32(m[0:]) != boltMagic || binary.LittleEndian.Uint32(m[4:]) != boltVersion ||
		binary.LittleEndian.Uint64(m[56:]) != h.Sum64() {
		return meta{}, false
	}
	return meta{
		pageSize: binary.LittleEndian.Uint32(m[8:]),
		root:     binary.LittleEndian.Uint64(m[16:]),
		freelist: binary.LittleEndian.Uint64(m[32:]),
		pgid:     binary.LittleEndian.Uint64(m[40:]),
		txid:     binary.LittleEndian.Uint64(m[48:]),
	}, true
}

// pageChecker walks the pages of one file.
type pageChecker struct {
	r        io.ReaderAt
	size     int64
	pageSize int64
	meta     meta
	seen     map[uint64]bool
	freed    map[uint64]bool
}

// checkPages checks the structure of the bbolt file r of size bytes: two
// meta pages of which at least one is valid, a file long enough for every
// page the newest valid meta counts, a freelist and a tree of buckets
// whose pages are all inside the file, of the right kind, referenced once
// and with every element inside its page. It returns the reason in plain
// words, or nil. It does not check key order or free-page accounting:
// bbolt's own Tx.Check does, once the file is known to be safe to read.
func checkPages(r io.ReaderAt, size int64) error {
	if size == 0 {
		return errors.New("it is empty: 0 bytes")
	}
	m, pageSize, err := readMeta(r, size)
	if err != nil {
		return err
	}
	c := &pageChecker{r: r, size: size, pageSize: pageSize, meta: m, seen: map[uint64]bool{0: true, 1: true}, freed: map[uint64]bool{}}
	if m.pgid < 2 || m.pgid > uint64(size)/uint64(pageSize) {
		return fmt.Errorf("it is truncated: %d bytes, where its header counts %d pages of %d bytes, %d bytes",
			size, m.pgid, pageSize, m.pgid*uint64(pageSize))
	}
	if m.freelist != noFreelist {
		if err := c.checkFreelist(m.freelist); err != nil {
			return err
		}
	}
	return c.checkTree(m.root, 0, "the root bucket")
}

// readMeta finds the page size as bbolt does (from meta page 0, else
// meta page 1 at each possible page size) and returns the valid meta with
// the highest transaction id.
func readMeta(r io.ReaderAt, size int64) (meta, int64, error) {
	first := make([]byte, pageHeaderSize+metaSize)
	if _, err := r.ReadAt(first, 0); err != nil {
		return meta{}, 0, fmt.Errorf("it is not a bbolt file (only %d bytes)", size)
	}
	var pageSize int64
	if m0, ok := parseMeta(first); ok {
		pageSize = int64(m0.pageSize)
	} else {
		for i := range 15 {
			ps := int64(1024) << i
			if ps+int64(len(first)) > size {
				break
			}
			b := make([]byte, len(first))
			if _, err := r.ReadAt(b, ps); err == nil {
				if m1, ok := parseMeta(b); ok && int64(m1.pageSize) == ps {
					pageSize = ps
					break
				}
			}
		}
	}
	if pageSize < 1024 || pageSize > 1<<24 || pageSize&(pageSize-1) != 0 {
		return meta{}, 0, errors.New("it is not a bbolt file, or both of its header pages are damaged")
	}
	var best meta
	found := false
	for id := range int64(2) {
		b := make([]byte, pageHeaderSize+metaSize)
		if _, err := r.ReadAt(b, id*pageSize); err != nil {
			continue
		}
		m, ok := parseMeta(b)
		if !ok || int64(m.pageSize) != pageSize || binary.LittleEndian.Uint64(b[0:]) != uint64(id) {
			continue
		}
		if !found || m.txid > best.txid {
			best, found = m, true
		}
	}
	if !found {
		return meta{}, 0, errors.New("it is not a bbolt file, or both of its header pages are damaged")
	}
	return best, pageSize, nil
}

// page reads page id with its overflow pages, checking that they are
// inside the file and seen for the first time.
func (c *pageChecker) page(id uint64, what string) ([]byte, error) {
	if id < 2 || id >= c.meta.pgid {
		return nil, fmt.Errorf("%s points at page %d, outside the file's %d pages", what, id, c.meta.pgid)
	}
	hdr := make([]byte, pageHeaderSize)
	if _, err := c.r.ReadAt(hdr, int64(id)*c.pageSize); err != nil {
		return nil, fmt.Errorf("%s: page %d cannot be read: %v", what, id, err)
	}
	if got := binary.LittleEndian.Uint64(hdr); got != id {
		return nil, fmt.Errorf("%s: page %d says it is page %d", what, id, got)
	}
	overflow := uint64(binary.LittleEndian.Uint32(hdr[12:]))
	if overflow >= c.meta.pgid-id {
		return nil, fmt.Errorf("%s: page %d runs %d pages past the end of the file", what, id, overflow)
	}
	for p := id; p <= id+overflow; p++ {
		if c.seen[p] {
			return nil, fmt.Errorf("%s: page %d is used twice", what, p)
		}
		c.seen[p] = true
	}
	b := make([]byte, int64(overflow+1)*c.pageSize)
	if _, err := c.r.ReadAt(b, int64(id)*c.pageSize); err != nil {
		return nil, fmt.Errorf("%s: page %d cannot be read: %v", what, id, err)
	}
	return b, nil
}

func (c *pageChecker) checkFreelist(id uint64) error {
	b, err := c.page(id, "the free-page list")
	if err != nil {
		return err
	}
	if binary.LittleEndian.Uint16(b[8:]) != freelistPageFlag {
		return fmt.Errorf("the free-page list at page %d is not a free-page list", id)
	}
	n, at := uint64(binary.LittleEndian.Uint16(b[10:])), uint64(pageHeaderSize)
	if n == 0xFFFF { // the count is the first id
		if len(b) < pageHeaderSize+8 {
			return fmt.Errorf("the free-page list at page %d is cut short", id)
		}
		n, at = binary.LittleEndian.Uint64(b[pageHeaderSize:]), pageHeaderSize+8
	}
	if n > (uint64(len(b))-at)/8 {
		return fmt.Errorf("the free-page list at page %d counts %d pages, more than it holds", id, n)
	}
	for i := range n {
		p := binary.LittleEndian.Uint64(b[at+8*i:])
		if p < 2 || p >= c.meta.pgid {
			return fmt.Errorf("the free-page list names page %d, outside the file's %d pages", p, c.meta.pgid)
		}
		c.freed[p] = true
	}
	return nil
}

// checkTree checks the bucket tree rooted at page id.
func (c *pageChecker) checkTree(id uint64, depth int, what string) error {
	if depth > maxDepth {
		return fmt.Errorf("%s is nested more than %d levels deep", what, maxDepth)
	}
	if c.freed[id] {
		return fmt.Errorf("%s uses page %d, which is also listed as free", what, id)
	}
	b, err := c.page(id, what)
	if err != nil {
		return err
	}
	return c.checkNode(b, id, depth, what)
}

// checkNode checks one branch or leaf page b (inline pages included).
func (c *pageChecker) checkNode(b []byte, id uint64, depth int, what string) error {
	flags := binary.LittleEndian.Uint16(b[8:])
	count := int(binary.LittleEndian.Uint16(b[10:]))
	if flags != branchPageFlag && flags != leafPageFlag {
		return fmt.Errorf("%s: page %d is of kind %#x, neither branch nor leaf", what, id, flags)
	}
	if pageHeaderSize+count*elementSize > len(b) {
		return fmt.Errorf("%s: page %d counts %d elements, more than it holds", what, id, count)
	}
	if flags == branchPageFlag && count == 0 {
		return fmt.Errorf("%s: branch page %d is empty", what, id)
	}
	for i := range count {
		at := pageHeaderSize + i*elementSize
		e := b[at : at+elementSize]
		if flags == branchPageFlag {
			pos, ksize := uint64(binary.LittleEndian.Uint32(e[0:])), uint64(binary.LittleEndian.Uint32(e[4:]))
			if uint64(at)+pos+ksize > uint64(len(b)) {
				return fmt.Errorf("%s: element %d of page %d lies outside the page", what, i, id)
			}
			if err := c.checkTree(binary.LittleEndian.Uint64(e[8:]), depth+1, what); err != nil {
				return err
			}
			continue
		}
		lflags := binary.LittleEndian.Uint32(e[0:])
		pos, ksize, vsize := uint64(binary.LittleEndian.Uint32(e[4:])), uint64(binary.LittleEndian.Uint32(e[8:])), uint64(binary.LittleEndian.Uint32(e[12:]))
		if uint64(at)+pos+ksize+vsize > uint64(len(b)) {
			return fmt.Errorf("%s: element %d of page %d lies outside the page", what, i, id)
		}
		if lflags&bucketLeafFlag == 0 {
			continue
		}
		key := b[uint64(at)+pos : uint64(at)+pos+ksize]
		val := b[uint64(at)+pos+ksize : uint64(at)+pos+ksize+vsize]
		name := fmt.Sprintf("bucket %q", key)
		if len(val) < bucketHeader {
			return fmt.Errorf("%s: its header is cut short", name)
		}
		if root := binary.LittleEndian.Uint64(val); root != 0 {
			if err := c.checkTree(root, depth+1, name); err != nil {
				return err
			}
			continue
		}
		// An inline bucket: its one leaf page follows the header.
		inline := val[bucketHeader:]
		if len(inline) < pageHeaderSize {
			return fmt.Errorf("%s: its inline page is cut short", name)
		}
		if binary.LittleEndian.Uint16(inline[8:]) != leafPageFlag {
			return fmt.Errorf("%s: its inline page is not a leaf", name)
		}
		if depth+1 > maxDepth {
			return fmt.Errorf("%s is nested more than %d levels deep", name, maxDepth)
		}
		if err := c.checkNode(inline, id, depth+1, name); err != nil {
			return err
		}
	}
	return nil
}
