//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"example.com/pifleet/fleet/controlapi"
)

// rawWatchChanges reads the control API's watch at query over its unix
// socket, as a client of its own would, until the change that ends says
// so: the changes' data lines and the stream's bytes until then.
func rawWatchChanges(t *testing.T, ctx context.Context, sock, query string, opened chan<- struct{}, end func(string) bool) (data []string, total int) {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/v1/watch"+query, nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Error(err)
		close(opened)
		return nil, 0
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	for {
		line, err := r.ReadString('\n')
		total += len(line)
		if err != nil {
			t.Errorf("watch%s: %v after %d changes", query, err, len(data))
			return data, total
		}
		if line == ": watching\n" {
			close(opened)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, strings.TrimSuffix(d, "\n"))
			if end(d) {
				return data, total
			}
		}
	}
}

// Through the real server, agent and scripted worker: a watcher that
// asks for deltas gets an answer's updates as deltas (a fraction of the
// bytes of a watcher that does not), and the Go client rebuilds each
// event as the other watcher reads it.
func TestWatchDeltasThroughTheRealStack(t *testing.T) {
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	publishDefault(t, reg, map[string]string{"bundle.json": `{"model":{"primary":{"provider":"faux","id":"faux-1"}}}`})
	cmd := &ServeCmd{StateDir: filepath.Join(dir, "state"), Registry: reg, Listen: "127.0.0.1:0",
		Agent: []string{"box=" + startWorkerAgent(t, reg)}, WhoisStatic: []string{"127.0.0.1=box"},
		EveryUpdate: true} // every chunk an update: what a watch's deltas save
	ctx, cancel := context.WithTimeout(context.Background(), 4*e2eWait)
	defer cancel()
	s, c := startServe(t, cmd)
	if !s.API.IsUnix() {
		t.Fatalf("the API listens on %s", s.API)
	}
	api := "--api=" + s.API.String()
	run := cliOK(t, api)
	run("trust", "set", "box", "steer")
	awaitAgentState(t, c, "box", "established")
	id := strings.TrimSpace(run("spawn", "--agent=box", "--cwd="+dir, "--bundle=default"))

	answer := strings.Repeat("<script>x</script> & \"é\" ", 120) // 3 KB, streamed in 16-character chunks
	ends := func(d string) bool {
		return strings.Contains(d, `"event":"message_end"`) && strings.Contains(d, `"role":"assistant"`)
	}
	type result struct {
		data  []string
		total int
	}
	watch := func(query string) (chan struct{}, chan result) {
		opened, done := make(chan struct{}), make(chan result, 1)
		go func() {
			d, n := rawWatchChanges(t, ctx, s.API.Address, query, opened, ends)
			done <- result{d, n}
		}()
		return opened, done
	}
	wholeOpened, wholeDone := watch("")
	deltaOpened, deltaDone := watch("?deltas=1")
	<-wholeOpened
	<-deltaOpened
	stream, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()

	run("prompt", "--wait", id, "say: "+answer)
	var rebuilt []controlapi.Change
	for {
		ch, err := stream.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ch.Kind == controlapi.ChangeEvent {
			rebuilt = append(rebuilt, ch)
		}
		if ch.Event == "message_end" && bytes.Contains(ch.Data, []byte(`"role":"assistant"`)) {
			break
		}
	}
	whole, deltas := <-wholeDone, <-deltaDone

	var wholeEvents []controlapi.Change
	for _, d := range whole.data {
		var ch controlapi.Change
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatal(err)
		}
		if ch.Kind == controlapi.ChangeEvent {
			wholeEvents = append(wholeEvents, ch)
		}
	}
	if len(rebuilt) != len(wholeEvents) {
		t.Fatalf("the Go client got %d events, the watcher without deltas %d", len(rebuilt), len(wholeEvents))
	}
	updates := 0
	for i := range rebuilt {
		if !bytes.Equal(rebuilt[i].Data, wholeEvents[i].Data) {
			t.Fatalf("event %d rebuilt as\n%s\nwant\n%s", i, rebuilt[i].Data, wholeEvents[i].Data)
		}
		if rebuilt[i].Event == "message_update" {
			updates++
		}
	}
	coded := strings.Count(strings.Join(deltas.data, "\n"), `"delta":{"u":`)
	if updates < utf8.RuneCountInString(answer)/16 || coded < updates*3/4 {
		t.Errorf("%d updates, %d of them as deltas", updates, coded)
	}
	if deltas.total*10 > whole.total {
		t.Errorf("the answer cost %d bytes with deltas, %d without", deltas.total, whole.total)
	}
	run("stop", id)
	t.Logf("%d-byte answer, %d updates: %d bytes with deltas, %d without", len(answer), updates, deltas.total, whole.total)
}
