package controlapi

import (
	"context"
	"net/http"
)

// WorktreeBackend is the part of Backend for isolated workers (a git
// worktree each): the task's diff against its base, and the delivery of
// its work.
type WorktreeBackend interface {
	// TaskDiff is the task's change: its worker's worktree against the
	// commit its branch started from (stat: git diff --stat).
	TaskDiff(ctx context.Context, taskID string, stat bool) (FileResult, error)
	// Deliver delivers the task's work (error code delivery_failed with
	// the agent's code in Detail: merge_conflict, target_dirty, …; the
	// task is then still under review).
	Deliver(ctx context.Context, taskID string, req DeliverRequest) (Delivery, error)
}

// Isolation asks for a worker in a git worktree of its own (spawn).
type Isolation struct {
	// Branch names its new branch (default pifleet/<taskId>-<slug>); Base
	// the ref it starts from (default HEAD, on a branch, with no
	// uncommitted changes).
	Branch string `json:"branch,omitempty"`
	Base   string `json:"base,omitempty"`
}

// DeliverRequest is the body of POST /v1/tasks/{id}/deliver (and the
// deliver fields of an accept).
type DeliverRequest struct {
	// Mode is branch, patch or merge.
	Mode string `json:"mode"`
	// Target is the branch a merge goes into (default: the branch the
	// worktree started from); Message the commit message.
	Target  string `json:"target,omitempty"`
	Message string `json:"message,omitempty"`
}

func (r DeliverRequest) validate() error {
	switch r.Mode {
	case "branch", "patch", "merge":
		return nil
	}
	return badRequest("deliver mode %q is not branch, patch or merge", r.Mode)
}

// Delivery is how a task's work was delivered.
type Delivery struct {
	Mode   string `json:"mode"`
	Branch string `json:"branch,omitempty"`
	// Commit is the branch's head after the delivery commit (the merge
	// commit for a merge, into Target).
	Commit string `json:"commit,omitempty"`
	Target string `json:"target,omitempty"`
	// Patch is git format-patch text (mode patch).
	Patch string `json:"patch,omitempty"`
}

// DiffStat is the size of an isolated task's change.
type DiffStat struct {
	Files      int `json:"files"`
	Insertions int `json:"insertions"`
	Deletions  int `json:"deletions"`
}

func (s *Server) registerWorktree(p string) {
	s.mux.HandleFunc("GET "+p+"/tasks/{id}/diff", s.taskDiff)
	s.mux.HandleFunc("POST "+p+"/tasks/{id}/deliver", s.deliver)
}

func (s *Server) taskDiff(w http.ResponseWriter, r *http.Request) {
	stat, err := boolParam(r.URL.Query(), "stat")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.b.TaskDiff(r.Context(), r.PathValue("id"), stat)
	s.reply(w, r, res, err)
}

func (s *Server) deliver(w http.ResponseWriter, r *http.Request) {
	var req DeliverRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.b.Deliver(r.Context(), r.PathValue("id"), req)
	s.reply(w, r, d, err)
}

// TaskDiff is the task's change against its base.
func (c *Client) TaskDiff(ctx context.Context, taskID string, stat bool) (FileResult, error) {
	var res FileResult
	path := "/tasks/" + seg(taskID) + "/diff"
	if stat {
		path += "?stat=true"
	}
	err := c.call(ctx, http.MethodGet, path, nil, &res)
	return res, err
}

// Deliver delivers a task's work.
func (c *Client) Deliver(ctx context.Context, taskID string, req DeliverRequest) (Delivery, error) {
	var d Delivery
	err := c.call(ctx, http.MethodPost, "/tasks/"+seg(taskID)+"/deliver", req, &d)
	return d, err
}
