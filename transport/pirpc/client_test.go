package pirpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// peer plays the worker's side of the pipes in client tests. These tests
// pin down protocol corner cases (ordering, lost ids, slow consumers,
// timers) that a real worker cannot be made to produce on demand; the same
// flows run against real workers in the integration tests.
type peer struct {
	t       *testing.T
	c       *Client
	cmds    *bufio.Reader  // what the client wrote to "stdin"
	stdin   *io.PipeReader // closed at the end so stray writes fail
	stdout  *io.PipeWriter // records for the client
	drained chan []Line
}

type cmdSeen struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

func newPeer(t *testing.T, opts Options) *peer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &peer{t: t, cmds: bufio.NewReader(inR), stdin: inR, stdout: outW}
	p.c = NewClient(inW, outR, opts)
	return p
}

// next reads the next command the client wrote.
func (p *peer) next() cmdSeen {
	p.t.Helper()
	line, err := p.cmds.ReadBytes('\n')
	if err != nil {
		p.t.Fatalf("reading command: %v", err)
	}
	var c cmdSeen
	if err := json.Unmarshal(line, &c); err != nil {
		p.t.Fatalf("command %q: %v", line, err)
	}
	return c
}

func (p *peer) send(records ...string) {
	p.t.Helper()
	for _, r := range records {
		if _, err := io.WriteString(p.stdout, r+"\n"); err != nil {
			p.t.Fatalf("writing record: %v", err)
		}
	}
}

func (p *peer) respond(c cmdSeen, data string) {
	p.t.Helper()
	if data == "" {
		p.send(fmt.Sprintf(`{"id":%q,"type":"response","command":%q,"success":true}`, c.ID, c.Type))
		return
	}
	p.send(fmt.Sprintf(`{"id":%q,"type":"response","command":%q,"success":true,"data":%s}`, c.ID, c.Type, data))
}

// collect reads Lines in the background until the channel closes.
func (p *peer) collect() {
	p.drained = make(chan []Line, 1)
	go func() {
		var all []Line
		for l := range p.c.Lines() {
			all = append(all, l)
		}
		p.drained <- all
	}()
}

// end closes the worker side and returns every line delivered.
func (p *peer) end() []Line {
	p.t.Helper()
	p.stdout.Close()
	<-p.c.Done()
	p.stdin.Close()
	if p.drained == nil {
		p.c.Close()
		return nil
	}
	return <-p.drained
}

func idle(streaming bool, pending int) string {
	return fmt.Sprintf(`{"isStreaming":%v,"pendingMessageCount":%d,"messageCount":2,"sessionId":"s"}`, streaming, pending)
}

func TestClientMatchesOutOfOrderResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{DiscardLines: true})
		ctx := context.Background()
		type result struct {
			st  *State
			err error
		}
		first := make(chan result, 1)
		go func() {
			st, err := p.c.GetState(ctx)
			first <- result{st, err}
		}()
		a := p.next()
		second := make(chan error, 1)
		go func() { second <- p.c.Prompt(ctx, "hi") }()
		b := p.next()
		if a.Type != "get_state" || b.Type != "prompt" || a.ID == b.ID || a.ID == "" {
			t.Fatalf("commands %+v %+v", a, b)
		}
		// pi answers the later command first.
		p.respond(b, "")
		if err := <-second; err != nil {
			t.Fatalf("prompt: %v", err)
		}
		p.respond(a, `{"sessionFile":"/s.jsonl","isStreaming":true,"model":{"id":"faux-1","provider":"faux"}}`)
		r := <-first
		if r.err != nil || r.st.SessionFile != "/s.jsonl" || !r.st.IsStreaming || r.st.Model.ID != "faux-1" {
			t.Fatalf("get_state: %+v %v", r.st, r.err)
		}
		p.end()
	})
}

func TestClientUnknownCommandIsUnsupported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{DiscardLines: true})
		ctx := context.Background()
		errs := make(chan error, 2)
		go func() {
			_, err := Do[json.RawMessage](ctx, p.c, GetEntries{Since: "ab12cd34"})
			errs <- err
		}()
		entries := p.next()
		go func() {
			_, err := p.c.GetState(ctx)
			errs <- err
		}()
		state := p.next()
		// pi drops the id of an unknown command.
		p.send(`{"type":"response","command":"get_entries","success":false,"error":"Unknown command: get_entries"}`)
		if err := <-errs; !errors.Is(err, ErrUnsupported) {
			t.Fatalf("get_entries: %v, want ErrUnsupported", err)
		}
		p.respond(state, idle(false, 0))
		if err := <-errs; err != nil {
			t.Fatalf("get_state: %v", err)
		}
		if entries.ID == "" {
			t.Fatal("the client sent get_entries without an id")
		}
		// A failure with an id is a *CommandError, not ErrUnsupported.
		go func() { errs <- p.c.Prompt(ctx, "again") }()
		pr := p.next()
		p.send(fmt.Sprintf(`{"id":%q,"type":"response","command":"prompt","success":false,"error":"Agent is already processing."}`, pr.ID))
		err := <-errs
		var ce *CommandError
		if !errors.As(err, &ce) || errors.Is(err, ErrUnsupported) || ce.Message != "Agent is already processing." {
			t.Fatalf("prompt: %v", err)
		}
		p.end()
	})
}

func TestClientDeliversLinesInOrderAndSettlesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{})
		p.collect()
		events := []string{
			`{"type":"agent_start"}`, `{"type":"turn_start"}`,
			`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"x\u2028y"}],"stopReason":"error","errorMessage":"503"}}`,
			`{"type":"turn_end"}`, `{"type":"agent_end","messages":[]}`,
		}
		p.send(events...)
		b1 := p.next()
		if b1.Type != "get_state" {
			t.Fatalf("barrier is %+v", b1)
		}
		// The retry was announced in the same step as agent_end: the first
		// barrier's answer must not settle.
		p.send(`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"503"}`)
		p.respond(b1, idle(false, 0))
		p.send(`{"type":"agent_start"}`, `{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"stop"}}`,
			`{"type":"auto_retry_end","success":true,"attempt":1}`, `{"type":"agent_end","messages":[]}`)
		b2 := p.next()
		p.respond(b2, idle(false, 0))
		p.send(`{"type":"session_info_changed","name":"after"}`)
		lines := p.end()

		var got []string
		settles := 0
		for _, l := range lines {
			switch {
			case l.Settled != nil:
				settles++
				got = append(got, "SETTLED")
				if !l.Synthetic || string(l.Raw) != `{"type":"agent_settled","aborted":false}` {
					t.Errorf("settle line %+v", l)
				}
			case l.Response != nil:
				got = append(got, fmt.Sprintf("response(own=%v)", l.Own))
			default:
				got = append(got, string(l.Event.Type))
			}
		}
		want := "agent_start turn_start message_end turn_end agent_end auto_retry_start response(own=true) " +
			"agent_start message_end auto_retry_end agent_end response(own=true) SETTLED session_info_changed"
		if strings.Join(got, " ") != want {
			t.Fatalf("lines:\n got %s\nwant %s", strings.Join(got, " "), want)
		}
		if settles != 1 {
			t.Fatalf("%d settles", settles)
		}
		if string(lines[2].Raw) != events[2] {
			t.Errorf("raw line changed: %s", lines[2].Raw)
		}
	})
}

func TestClientRunWaitAfterSilentOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{RunWait: 3 * time.Second})
		p.collect()
		start := time.Now()
		p.send(`{"type":"agent_start"}`, `{"type":"agent_end","messages":[]}`)
		b1 := p.next()
		p.send(`{"type":"compaction_start","reason":"overflow"}`)
		p.respond(b1, idle(false, 0))
		p.send(`{"type":"compaction_end","reason":"overflow","aborted":false,"willRetry":true}`)
		// No run comes: after RunWait the client asks again.
		b2 := p.next()
		if waited := time.Since(start); waited != 3*time.Second {
			t.Fatalf("second barrier after %v, want 3s", waited)
		}
		p.respond(b2, idle(false, 0))
		lines := p.end()
		if last := lines[len(lines)-1]; last.Settled == nil {
			t.Fatalf("last line %s is not the settle", last.Raw)
		}
	})
}

func TestClientNativeSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{})
		p.collect()
		done := make(chan error, 1)
		go func() { done <- p.c.Prompt(context.Background(), "hi") }()
		pr := p.next()
		p.respond(pr, `{"disposition":"started"}`) // a newer pi
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		p.send(`{"type":"agent_start"}`, `{"type":"agent_end","messages":[],"willRetry":false}`, `{"type":"agent_settled","aborted":false}`)
		lines := p.end()
		// No barrier was sent: the next thing on stdin is EOF.
		if _, err := p.cmds.ReadByte(); err == nil {
			t.Fatal("the client sent a barrier to a pi that settles itself")
		}
		last := lines[len(lines)-1]
		if last.Event.Type != EventAgentSettled || last.Settled == nil || !last.Settled.Native || last.Synthetic {
			t.Fatalf("last line %+v", last)
		}
	})
}

func TestClientShedsUpdatesForASlowConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{QueueBytes: 8 << 10, DisableSettle: true})
		update := `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"` + strings.Repeat("d", 200) + `"}}`
		// Nobody reads Lines while pi writes: the writes must still
		// complete (the reader never stops on updates).
		p.send(`{"type":"message_start","message":{"role":"assistant","content":[]}}`)
		for range 500 {
			p.send(update)
		}
		p.send(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"whole"}]}}`)
		p.collect()
		lines := p.end()
		updates := 0
		for _, l := range lines[:len(lines)-1] {
			if l.Event.Type == EventMessageUpdate {
				updates++
			}
		}
		end := lines[len(lines)-1]
		if end.Event.Type != EventMessageEnd || end.Event.Message.Text() != "whole" {
			t.Fatalf("last line %s", end.Raw)
		}
		if updates+end.Shed != 500 || end.Shed == 0 {
			t.Fatalf("%d updates delivered, %d shed; want 500 in all, some shed", updates, end.Shed)
		}
	})
}

func TestClientBackpressureKeepsEveryOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{QueueBytes: 4 << 10, DisableSettle: true})
		const n = 200
		wrote := make(chan struct{})
		go func() {
			for i := range n {
				p.send(fmt.Sprintf(`{"type":"tool_execution_end","toolCallId":"t%d","toolName":"bash","result":{},"isError":false}`, i))
			}
			close(wrote)
		}()
		synctest.Wait()
		select {
		case <-wrote:
			t.Fatal("the queue grew past its cap: all writes completed with no consumer")
		default:
		}
		p.collect()
		<-wrote
		lines := p.end()
		if len(lines) != n {
			t.Fatalf("%d lines, want %d", len(lines), n)
		}
		for i, l := range lines {
			if l.Event.Tool.ToolCallID != fmt.Sprintf("t%d", i) {
				t.Fatalf("line %d is %s", i, l.Raw)
			}
		}
	})
}

func TestClientEndFailsPendingCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{DiscardLines: true})
		errc := make(chan error, 1)
		go func() {
			_, err := p.c.Call(context.Background(), Compact{})
			errc <- err
		}()
		p.next()
		p.stdout.CloseWithError(io.ErrUnexpectedEOF)
		if err := <-errc; !errors.Is(err, ErrClosed) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v", err)
		}
		<-p.c.Done()
		if _, err := p.c.GetState(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("call after the end: %v", err)
		}
		p.stdin.Close()
		if _, ok := <-p.c.Lines(); ok {
			t.Fatal("Lines still open")
		}
	})
}

func TestClientCallContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{})
		p.collect()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- p.c.Abort(ctx) }()
		late := p.next()
		if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		// The late answer matches nothing; it is still delivered.
		p.respond(late, "")
		lines := p.end()
		if len(lines) != 1 || lines[0].Own {
			t.Fatalf("lines %+v", lines)
		}
		if _, _, unmatched := p.c.Counters(); unmatched != 1 {
			t.Fatalf("unmatched = %d", unmatched)
		}
	})
}

func TestClientRawAndAnomalies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{MaxLineBytes: 1024})
		p.collect()
		if err := p.c.WriteRaw([]byte("{\"type\":\"abort\"}\n{\"type\":\"abort\"}")); !errors.Is(err, ErrEmbeddedNewline) {
			t.Fatalf("err = %v", err)
		}
		go p.c.WriteRaw([]byte(`{"id":"srv-1","type":"get_state"}`))
		if c := p.next(); c.ID != "srv-1" {
			t.Fatalf("raw command arrived as %+v", c)
		}
		go p.c.Send(ExtensionUIResponse{ID: "u1", Cancelled: true})
		if c := p.next(); c.ID != "u1" || c.Type != "extension_ui_response" {
			t.Fatalf("ui response arrived as %+v", c)
		}
		p.send("not json", `{"type":"x","big":"`+strings.Repeat("b", 2000)+`"}`,
			`{"id":"srv-1","type":"response","command":"get_state","success":true,"data":{}}`)
		lines := p.end()
		if len(lines) != 1 || lines[0].Own || lines[0].Response.ID != "srv-1" {
			t.Fatalf("lines %+v", lines)
		}
		tooLong, unparsed, _ := p.c.Counters()
		if tooLong != 1 || unparsed != 1 {
			t.Fatalf("tooLong %d unparsed %d", tooLong, unparsed)
		}
	})
}

func TestClientCloseStopsDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeer(t, Options{})
		p.send(`{"type":"agent_start"}`)
		if err := p.c.Close(); err != nil {
			t.Fatal(err)
		}
		<-p.c.Done() // Close closed the client's end of stdout
		for range p.c.Lines() {
		}
		p.stdin.Close()
		p.stdout.Close()
	})
}
