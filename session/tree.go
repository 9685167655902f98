package session

// Tree is the entry tree of a session file: every entry's parent, in file
// order. The leaf, pi's current position, is the last entry appended; a
// branch is an entry whose parent is not the entry before it.
type Tree struct {
	parent map[string]string
	order  []string
	kids   map[string][]string
}

func newTree() *Tree {
	return &Tree{parent: map[string]string{}, kids: map[string][]string{}}
}

// add records an entry; it reports false for a duplicate id.
func (t *Tree) add(id, parent string) bool {
	if _, dup := t.parent[id]; dup {
		return false
	}
	t.parent[id] = parent
	t.order = append(t.order, id)
	t.kids[parent] = append(t.kids[parent], id)
	return true
}

// Len returns the number of entries.
func (t *Tree) Len() int { return len(t.order) }

// Leaf returns the id of the last entry, or "" for an empty session.
func (t *Tree) Leaf() string {
	if len(t.order) == 0 {
		return ""
	}
	return t.order[len(t.order)-1]
}

// Has reports whether the tree holds id.
func (t *Tree) Has(id string) bool {
	_, ok := t.parent[id]
	return ok
}

// Parent returns id's parent ("" for a root) and whether id is known.
func (t *Tree) Parent(id string) (string, bool) {
	p, ok := t.parent[id]
	return p, ok
}

// Children returns the ids whose parent is id, in file order; Children("")
// returns the roots.
func (t *Tree) Children(id string) []string {
	return append([]string(nil), t.kids[id]...)
}

// Branch returns the path from the root to id (both included), the
// entries pi would build the context from with id as leaf. It stops early
// at a parent the file does not hold, and returns nil for an unknown id.
func (t *Tree) Branch(id string) []string {
	if !t.Has(id) {
		return nil
	}
	var rev []string
	seen := map[string]bool{}
	for cur := id; cur != "" && !seen[cur]; {
		p, ok := t.parent[cur]
		if !ok {
			break
		}
		seen[cur] = true
		rev = append(rev, cur)
		cur = p
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}
