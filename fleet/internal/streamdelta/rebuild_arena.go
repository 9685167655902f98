package streamdelta

import "slices"

// The rebuild side's copies of nodes. A short entry changes its chain's
// step and partial message on a few nodes, which are copies (the Lines
// not yet written read the earlier versions): taken from the Rebuilder's
// arena, they are a share of a block each instead of an allocation each.

// copy is n.copy() from a's blocks (a nil a allocates it).
func (a *arena) copy(n *node) *node {
	if a == nil {
		return n.copy()
	}
	c := a.node(*n)
	c.keys, c.kids = slices.Clip(c.keys), slices.Clip(c.kids)
	return c
}

// clone returns a copy of kids from a's blocks (a nil a allocates it),
// its capacity clipped as carve's are.
func (a *arena) clone(kids []*node) []*node {
	if a == nil {
		return slices.Clip(slices.Clone(kids))
	}
	if len(a.ptrs)+len(kids) > cap(a.ptrs) {
		a.ptrs = make([]*node, 0, max(blockSize(cap(a.ptrs)), len(kids)))
	}
	start := len(a.ptrs)
	a.ptrs = append(a.ptrs, kids...)
	return a.ptrs[start:len(a.ptrs):len(a.ptrs)]
}

// applyIn is o.apply with the copies from a's blocks, for the ops that
// append to a string (d and s: a text's updates are one such op each);
// the other kinds are o.apply's.
func (o *op) applyIn(root *node, delta []byte, a *arena) (*node, error) {
	if o.kind != opDelta && o.kind != opString {
		return o.apply(root, delta)
	}
	top := a.copy(root)
	n := top
	for _, p := range o.path {
		if n.kind == 0 || p < 0 || p >= len(n.kids) {
			return nil, badEntry("path %v leaves the message", o.path)
		}
		n.raw = nil // its span is stale from here on
		n.kids = a.clone(n.kids)
		n.kids[p] = a.copy(n.kids[p])
		n = n.kids[p]
	}
	if !n.isString() {
		return nil, badEntry("op %c on a non-string at %v", o.kind, o.path)
	}
	suffix := delta
	if o.kind == opString {
		suffix = o.val[1 : len(o.val)-1]
	} else if delta == nil {
		return nil, badEntry("op d without a delta in the step")
	}
	n.appendString(suffix)
	return top, nil
}
