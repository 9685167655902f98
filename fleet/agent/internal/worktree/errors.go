package worktree

import "fmt"

// Error codes. The agent sends the spawn refusals as spawn_error codes and
// the delivery refusals as error codes.
const (
	CodeNoGit       = "no_git"        // git is not installed
	CodeNotARepo    = "not_a_repo"    // the cwd is in no git repository
	CodeNoCommit    = "no_commit"     // the repository has no commit yet
	CodeDirtyTree   = "dirty_tree"    // uncommitted changes and no base ref
	CodeDetached    = "detached_head" // HEAD is detached and no base ref
	CodeBadBase     = "bad_base"      // the base ref names no commit
	CodeBranchTaken = "branch_exists" // the branch exists already
	CodeConflict    = "merge_conflict"
	CodeTargetDirty = "target_dirty" // the merge target's checked-out tree has changes
	CodeNoTarget    = "no_target"    // merge without a target branch to merge into
	CodeGitFailed   = "git_failed"
)

// Error is a refusal with one of the codes above.
type Error struct {
	Code, Message string
	// Files are the conflicting paths of a merge_conflict.
	Files []string
}

func (e *Error) Error() string { return e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
