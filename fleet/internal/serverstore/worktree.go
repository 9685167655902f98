package serverstore

// Worktree is an isolated worker's git worktree, as its agent reported it.
type Worktree struct {
	Repo    string `json:"repo"`
	Path    string `json:"path"`
	Branch  string `json:"branch"`
	Base    string `json:"base"`
	BaseRef string `json:"baseRef,omitempty"`
}

// DiffStat is an isolated task's changes against its base at a task_done.
type DiffStat struct {
	Branch     string `json:"branch"`
	Base       string `json:"base"`
	Files      int    `json:"files"`
	Insertions int    `json:"insertions"`
	Deletions  int    `json:"deletions"`
}

// WorkDelivery is how a task's work was delivered.
type WorkDelivery struct {
	Mode   string `json:"mode"`
	Branch string `json:"branch,omitempty"`
	Commit string `json:"commit,omitempty"`
	Target string `json:"target,omitempty"`
	// Patch is the git format-patch text of a patch delivery.
	Patch string `json:"patch,omitempty"`
}
