package worktree

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// repoLocks serialise the changes to one repository's list of worktrees:
// git reads the other worktrees' metadata while it adds one, and fails
// ("failed to read .git/worktrees/…/commondir") when another add is
// half done.
var repoLocks sync.Map // repository top level → *sync.Mutex

func lockRepo(repo string) func() {
	m, _ := repoLocks.LoadOrStore(repo, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Spec asks for a worktree for one worker.
type Spec struct {
	// Cwd is the spawn's cwd: a directory inside the repository.
	Cwd string
	// Dir is where the worktree goes; it must not exist.
	Dir string
	// Branch is the new branch the worker works on.
	Branch string
	// Base is the ref the branch starts from; "" is HEAD, which must then
	// be on a branch with no uncommitted changes (they would be missing
	// from the worker's tree).
	Base string
}

// Tree is a worker's worktree, as the agent records it.
type Tree struct {
	// Repo is the top level of the repository the spawn named (the
	// user's own working tree, never written by the worker).
	Repo string `json:"repo"`
	// Dir is the worktree's top level; Cwd the worker's cwd in it (the
	// spawn cwd's place in the repository).
	Dir string `json:"dir"`
	Cwd string `json:"cwd"`
	// Branch is the worker's branch; Base the commit it started from and
	// BaseRef the branch that commit was taken from ("" for a commit or a
	// tag): the default target of a merge.
	Branch  string `json:"branch"`
	Base    string `json:"base"`
	BaseRef string `json:"baseRef,omitempty"`
}

// Stat is a diff's size.
type Stat struct {
	Files, Insertions, Deletions int
}

// Identity is who a delivery commit is by.
type Identity struct{ Name, Email string }

func (id Identity) env() []string {
	return []string{"GIT_AUTHOR_NAME=" + id.Name, "GIT_AUTHOR_EMAIL=" + id.Email,
		"GIT_COMMITTER_NAME=" + id.Name, "GIT_COMMITTER_EMAIL=" + id.Email}
}

// Plan checks that spec can be honoured and returns the tree it would
// create, without changing anything.
func (g Git) Plan(ctx context.Context, spec Spec) (Tree, error) {
	if err := g.Available(); err != nil {
		return Tree{}, err
	}
	cwd, err := filepath.EvalSymlinks(spec.Cwd)
	if err != nil {
		return Tree{}, errorf(CodeNotARepo, "cwd %s: %v", spec.Cwd, err)
	}
	top, err := g.line(ctx, cwd, "rev-parse", "--show-toplevel")
	if err != nil || top == "" {
		return Tree{}, errorf(CodeNotARepo, "cwd %s is not in a git repository: a worktree needs one", spec.Cwd)
	}
	top, _ = filepath.EvalSymlinks(top)
	rel, err := filepath.Rel(top, cwd)
	if err != nil {
		return Tree{}, errorf(CodeNotARepo, "cwd %s is outside its repository %s", spec.Cwd, top)
	}
	if !validBranch(ctx, g, top, spec.Branch) {
		return Tree{}, errorf(CodeGitFailed, "%q is not a valid branch name", spec.Branch)
	}
	t := Tree{Repo: top, Dir: spec.Dir, Cwd: filepath.Join(spec.Dir, rel), Branch: spec.Branch}
	if spec.Base == "" {
		if _, err := g.line(ctx, top, "rev-parse", "--verify", "-q", "HEAD^{commit}"); err != nil {
			return Tree{}, errorf(CodeNoCommit, "the repository %s has no commit yet", top)
		}
		ref, err := g.line(ctx, top, "symbolic-ref", "-q", "--short", "HEAD")
		if err != nil || ref == "" {
			return Tree{}, errorf(CodeDetached, "HEAD of %s is detached: name a base ref to start the worktree from", top)
		}
		dirty, err := g.run(ctx, top, nil, "status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return Tree{}, errorf(CodeGitFailed, "%v", err)
		}
		if strings.TrimSpace(dirty) != "" {
			return Tree{}, errorf(CodeDirtyTree, "%s has uncommitted changes, which the worker's worktree would not have: commit or stash them, or name a base ref", top)
		}
		t.BaseRef = ref
		spec.Base = "HEAD"
	} else if _, err := g.line(ctx, top, "show-ref", "--verify", "-q", "refs/heads/"+spec.Base); err == nil {
		t.BaseRef = spec.Base
	}
	base, err := g.line(ctx, top, "rev-parse", "--verify", "-q", spec.Base+"^{commit}")
	if err != nil || base == "" {
		return Tree{}, errorf(CodeBadBase, "base %q names no commit in %s", spec.Base, top)
	}
	t.Base = base
	if _, err := g.line(ctx, top, "show-ref", "--verify", "-q", "refs/heads/"+spec.Branch); err == nil {
		return Tree{}, errorf(CodeBranchTaken, "branch %s exists already in %s", spec.Branch, top)
	}
	if _, err := os.Lstat(spec.Dir); err == nil {
		return Tree{}, errorf(CodeGitFailed, "worktree directory %s exists already", spec.Dir)
	}
	return t, nil
}

func validBranch(ctx context.Context, g Git, dir, name string) bool {
	if name == "" || strings.HasPrefix(name, "-") {
		return false
	}
	_, err := g.run(ctx, dir, nil, "check-ref-format", "--branch", name)
	return err == nil
}

// Create makes t's worktree on its new branch at its base.
func (g Git) Create(ctx context.Context, t Tree) error {
	if err := os.MkdirAll(filepath.Dir(t.Dir), 0o700); err != nil {
		return errorf(CodeGitFailed, "worktree directory: %v", err)
	}
	unlock := lockRepo(t.Repo)
	_, err := g.run(ctx, t.Repo, nil, "worktree", "add", "-q", "-b", t.Branch, t.Dir, t.Base)
	unlock()
	if err != nil {
		return errorf(CodeGitFailed, "%v", err)
	}
	if err := os.MkdirAll(t.Cwd, 0o755); err != nil { // a cwd with no tracked file
		return errorf(CodeGitFailed, "worker cwd: %v", err)
	}
	return nil
}

// snapshot writes the worktree's current content (tracked and untracked
// files, ignored ones excepted) as a tree object, through a private index:
// the worker's own index is left alone.
func (g Git) snapshot(ctx context.Context, t Tree) (string, error) {
	f, err := os.CreateTemp("", "pifleet-index-")
	if err != nil {
		return "", err
	}
	idx := f.Name()
	f.Close()
	os.Remove(idx) // git wants to create it
	defer os.Remove(idx)
	env := []string{"GIT_INDEX_FILE=" + idx}
	if _, err := g.run(ctx, t.Dir, env, "read-tree", "HEAD"); err != nil {
		return "", errorf(CodeGitFailed, "%v", err)
	}
	if _, err := g.run(ctx, t.Dir, env, "add", "-A", "."); err != nil {
		return "", errorf(CodeGitFailed, "%v", err)
	}
	tree, err := g.run(ctx, t.Dir, env, "write-tree")
	if err != nil {
		return "", errorf(CodeGitFailed, "%v", err)
	}
	return strings.TrimSpace(tree), nil
}

// Stat is the size of the worker's changes against its base (committed
// or not).
func (g Git) Stat(ctx context.Context, t Tree) (Stat, error) {
	tree, err := g.snapshot(ctx, t)
	if err != nil {
		return Stat{}, err
	}
	out, err := g.run(ctx, t.Dir, nil, "diff", "--numstat", "--no-renames", t.Base, tree)
	if err != nil {
		return Stat{}, errorf(CodeGitFailed, "%v", err)
	}
	return parseNumstat(out), nil
}

// parseNumstat sums `git diff --numstat` ("-" for a binary file's lines).
func parseNumstat(out string) Stat {
	var s Stat
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 3)
		if len(f) != 3 {
			continue
		}
		s.Files++
		if n, err := strconv.Atoi(f[0]); err == nil {
			s.Insertions += n
		}
		if n, err := strconv.Atoi(f[1]); err == nil {
			s.Deletions += n
		}
	}
	return s
}

// Diff is the worker's changes against its base as a unified diff (or
// --stat), untracked files included.
func (g Git) Diff(ctx context.Context, t Tree, stat bool) (string, error) {
	tree, err := g.snapshot(ctx, t)
	if err != nil {
		return "", err
	}
	args := []string{"diff", "--no-color", "--no-ext-diff", "--binary"}
	if stat {
		args = []string{"diff", "--no-color", "--stat"}
	}
	out, err := g.run(ctx, t.Dir, nil, append(args, t.Base, tree)...)
	if err != nil {
		return "", errorf(CodeGitFailed, "%v", err)
	}
	return out, nil
}

// Commit commits everything the worker changed onto its branch (hooks
// skipped: the reviewer runs the checks) and returns the branch's head.
// With nothing to commit the head is returned unchanged.
func (g Git) Commit(ctx context.Context, t Tree, msg string, who Identity) (string, error) {
	if _, err := g.run(ctx, t.Dir, nil, "add", "-A", "."); err != nil {
		return "", errorf(CodeGitFailed, "%v", err)
	}
	if _, err := g.run(ctx, t.Dir, nil, "diff", "--cached", "--quiet"); err != nil {
		var ge *gitError
		if !errors.As(err, &ge) || ge.code != 1 {
			return "", errorf(CodeGitFailed, "%v", err)
		}
		if _, err := g.run(ctx, t.Dir, who.env(), "commit", "-q", "--no-verify", "--no-gpg-sign", "-m", msg); err != nil {
			return "", errorf(CodeGitFailed, "%v", err)
		}
	}
	head, err := g.line(ctx, t.Dir, "rev-parse", "HEAD")
	if err != nil {
		return "", errorf(CodeGitFailed, "%v", err)
	}
	return head, nil
}

// FormatPatch is the branch's commits since the base as git format-patch
// output (for git am).
func (g Git) FormatPatch(ctx context.Context, t Tree) (string, error) {
	out, err := g.run(ctx, t.Repo, nil, "format-patch", "--stdout", "--binary", "--no-color", t.Base+".."+t.Branch)
	if err != nil {
		return "", errorf(CodeGitFailed, "%v", err)
	}
	return out, nil
}

// Merge merges the branch into target (a merge commit, also for a fast
// forward). Where target is checked out (the user's tree, say), the merge
// runs there and needs it clean; elsewhere it runs in a scratch worktree
// and only the ref moves. A conflict leaves everything as it was and is
// an *Error with CodeConflict naming the files.
func (g Git) Merge(ctx context.Context, t Tree, target, scratch, msg string, who Identity) (string, error) {
	if target == "" {
		return "", errorf(CodeNoTarget, "no branch to merge into: the worktree started from a commit, name a target")
	}
	old, err := g.line(ctx, t.Repo, "rev-parse", "--verify", "-q", "refs/heads/"+target)
	if err != nil || old == "" {
		return "", errorf(CodeNoTarget, "target branch %s does not exist in %s", target, t.Repo)
	}
	dir, err := g.checkedOut(ctx, t.Repo, target)
	if err != nil {
		return "", err
	}
	inScratch := dir == ""
	unlock := lockRepo(t.Repo) // one merge at a time per repository
	defer unlock()
	if inScratch {
		if _, err := g.run(ctx, t.Repo, nil, "worktree", "add", "-q", "--detach", scratch, old); err != nil {
			return "", errorf(CodeGitFailed, "%v", err)
		}
		dir = scratch
		defer func() {
			_, _ = g.run(context.WithoutCancel(ctx), t.Repo, nil, "worktree", "remove", "--force", scratch)
			_, _ = g.run(context.WithoutCancel(ctx), t.Repo, nil, "worktree", "prune")
		}()
	} else {
		dirty, err := g.run(ctx, dir, nil, "status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return "", errorf(CodeGitFailed, "%v", err)
		}
		if strings.TrimSpace(dirty) != "" {
			return "", errorf(CodeTargetDirty, "%s is checked out in %s with uncommitted changes: commit or stash them first", target, dir)
		}
	}
	if _, err := g.run(ctx, dir, who.env(), "merge", "-q", "--no-ff", "--no-verify", "--no-edit", "-m", msg, t.Branch); err != nil {
		files, _ := g.run(ctx, dir, nil, "diff", "--name-only", "--diff-filter=U")
		_, _ = g.run(context.WithoutCancel(ctx), dir, nil, "merge", "--abort")
		if list := strings.Fields(files); len(list) > 0 {
			return "", &Error{Code: CodeConflict, Files: list,
				Message: "merging " + t.Branch + " into " + target + " conflicts in " + strings.Join(list, ", ")}
		}
		return "", errorf(CodeGitFailed, "%v", err)
	}
	head, err := g.line(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", errorf(CodeGitFailed, "%v", err)
	}
	if inScratch {
		if _, err := g.run(ctx, t.Repo, nil, "update-ref", "-m", "pifleet: "+msg, "refs/heads/"+target, head, old); err != nil {
			return "", errorf(CodeGitFailed, "%v (the target moved meanwhile?)", err)
		}
	}
	return head, nil
}

// checkedOut returns the worktree where branch is checked out ("" when
// none).
func (g Git) checkedOut(ctx context.Context, repo, branch string) (string, error) {
	out, err := g.run(ctx, repo, nil, "worktree", "list", "--porcelain")
	if err != nil {
		return "", errorf(CodeGitFailed, "%v", err)
	}
	var cur string
	for l := range strings.SplitSeq(out, "\n") {
		switch {
		case strings.HasPrefix(l, "worktree "):
			cur = strings.TrimPrefix(l, "worktree ")
		case l == "branch refs/heads/"+branch:
			return cur, nil
		}
	}
	return "", nil
}

// Rename gives the worker's branch a new name.
func (g Git) Rename(ctx context.Context, t Tree, branch string) error {
	if !validBranch(ctx, g, t.Repo, branch) {
		return errorf(CodeGitFailed, "%q is not a valid branch name", branch)
	}
	if _, err := g.run(ctx, t.Dir, nil, "branch", "-m", t.Branch, branch); err != nil {
		return errorf(CodeGitFailed, "%v", err)
	}
	return nil
}

// Remove deletes the worktree (whatever it holds) and prunes the
// repository's worktree list; with deleteBranch the branch goes too.
// A worktree already gone is not an error.
func (g Git) Remove(ctx context.Context, t Tree, deleteBranch bool) error {
	unlock := lockRepo(t.Repo)
	defer unlock()
	var errs []error
	if _, err := os.Lstat(t.Dir); err == nil {
		if _, err := g.run(ctx, t.Repo, nil, "worktree", "remove", "--force", "--force", t.Dir); err != nil {
			// Not a registered worktree (a half-made one): remove the files.
			if rerr := os.RemoveAll(t.Dir); rerr != nil {
				errs = append(errs, rerr)
			}
		}
	}
	if _, err := os.Stat(t.Repo); err == nil {
		if _, err := g.run(ctx, t.Repo, nil, "worktree", "prune"); err != nil {
			errs = append(errs, err)
		}
		if deleteBranch && t.Branch != "" {
			if _, err := g.line(ctx, t.Repo, "show-ref", "--verify", "-q", "refs/heads/"+t.Branch); err == nil {
				if _, err := g.run(ctx, t.Repo, nil, "branch", "-D", t.Branch); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Changed reports whether the worktree differs from its branch's head
// (uncommitted work).
func (g Git) Changed(ctx context.Context, t Tree) (bool, error) {
	out, err := g.run(ctx, t.Dir, nil, "status", "--porcelain")
	if err != nil {
		return false, errorf(CodeGitFailed, "%v", err)
	}
	return strings.TrimSpace(out) != "", nil
}

// Head is the commit the worker's branch points to.
func (g Git) Head(ctx context.Context, t Tree) (string, error) {
	h, err := g.line(ctx, t.Dir, "rev-parse", "HEAD")
	if err != nil {
		return "", errorf(CodeGitFailed, "%v", err)
	}
	return h, nil
}
