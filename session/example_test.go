package session_test

import (
	"fmt"
	"log"

	"example.com/pifleet/session"
)

const clone = "../testdata/sessions/agent/--work-api--/2026-05-01T10-00-00-000Z_0196a1b2-0000-7000-8000-000000000002.jsonl"

func ExampleSummarize() {
	s, err := session.Summarize(clone)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Name, session.KindOf(s.Name))
	fmt.Println("leaf", s.Leaf, "entries", s.Entries, "assistant messages", s.Messages["assistant"])
	fmt.Println("pi is still writing a line:", s.Torn)
	// Output:
	// task:t42:fix-tests task
	// leaf b000000b entries 19 assistant messages 5
	// pi is still writing a line: true
}

func ExampleEntriesAfter() {
	entries, cursor, err := session.EntriesAfter(clone, "b0000008")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.ID, e.Type)
	}
	// Later: only what pi appended since (nothing yet; the torn last line
	// comes once pi finishes it).
	more, _, err := cursor.Next(0)
	fmt.Println(len(more), err)
	// Output:
	// b0000009 label
	// b000000a custom
	// b000000b custom_message
	// 0 <nil>
}

func ExampleTaskName() {
	base, _ := session.BaselineName("api")
	task, _ := session.TaskName("t42", "Fix the failing tests in ./store!")
	parsed, _ := session.ParseName(task)
	fmt.Println(base)
	fmt.Println(task)
	fmt.Println(parsed.Kind, parsed.TaskID, parsed.Slug)
	// Output:
	// baseline:api
	// task:t42:fix-the-failing-tests-in-store
	// task t42 fix-the-failing-tests-in-store
}

func ExampleProjection() {
	p := session.NewProjection()
	p.Connected("gpu-box")
	// The agent's full report on connect.
	_, err := p.ApplyReport(session.Report{Machine: "gpu-box", Full: true, Sessions: []session.SessionInfo{
		{SessionID: "s1", Path: "/s/base.jsonl", Name: "baseline:api", Cwd: "/work/api", Kind: session.KindBaseline, Pinned: true, UpdatedAt: 100},
	}})
	if err != nil {
		log.Fatal(err)
	}
	p.Annotate("gpu-box", "/s/base.jsonl", func(f *session.ServerFields) { f.GitHead = "abc123" })
	state, _ := p.State("gpu-box")
	rec, _ := p.Get("gpu-box", "/s/base.jsonl")
	fmt.Println(state, rec.Name, rec.GitHead)

	p.ConnectionLost("gpu-box")
	state, _ = p.State("gpu-box")
	fmt.Println(state)
	// Output:
	// synced baseline:api abc123
	// stale_projection
}
