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
	return blockCopy(&a.ptrs, kids)
}

// copyPath copies root and the nodes on path (from a's blocks; a nil a
// allocates them), so that the node at path can be changed without
// changing root's tree. It returns the copy of root, the node at path
// and its parent (nil when path is empty) with its position there; ok is
// false when path leaves the tree.
func (a *arena) copyPath(root *node, path []int) (top, parent *node, at int, n *node, ok bool) {
	top = a.copy(root)
	n, at = top, -1
	for _, p := range path {
		if n.kind == 0 || p < 0 || p >= len(n.kids) {
			return nil, nil, -1, nil, false
		}
		n.raw = nil // its span is stale from here on
		n.kids = a.clone(n.kids)
		n.kids[p] = a.copy(n.kids[p])
		parent, at, n = n, p, n.kids[p]
	}
	return top, parent, at, n, true
}
