package pirpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"example.com/pifleet/transport/pirpc"
)

// A Client over a worker's pipes. Here a goroutine plays pi's side; in
// real use w and r are the stdin and stdout of `pi --mode rpc`.
func ExampleClient() {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	go func() { // the worker
		cmds := bufio.NewScanner(stdinR)
		for cmds.Scan() {
			var c struct{ ID, Type string }
			json.Unmarshal(cmds.Bytes(), &c)
			fmt.Fprintf(stdoutW, `{"id":%q,"type":"response","command":%q,"success":true,"data":{"isStreaming":false,"sessionFile":"/s/a.jsonl","sessionId":"a"}}`+"\n", c.ID, c.Type)
		}
		stdoutW.Close()
	}()

	c := pirpc.NewClient(stdinW, stdoutR, pirpc.Options{})
	go func() {
		for range c.Lines() { // every stdout record, in order; an agent forwards them
		}
	}()
	st, err := c.GetState(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.SessionFile, st.IsStreaming)
	c.CloseInput()
	<-c.Done()
	// Output: /s/a.jsonl false
}

// The settle detector on its own: a failed attempt that pi retries. The
// first barrier's answer comes after auto_retry_start and does not count.
func ExampleSettleDetector() {
	d := pirpc.NewSettleDetector(0)
	show := func(step string, a pirpc.SettleAction) {
		fmt.Printf("%-22s barrier=%d settled=%v\n", step, a.Barrier, a.Settled != nil)
	}
	show("agent_start", d.OnEvent(&pirpc.Event{Type: pirpc.EventAgentStart}))
	show("agent_end", d.OnEvent(&pirpc.Event{Type: pirpc.EventAgentEnd}))
	show("auto_retry_start", d.OnEvent(&pirpc.Event{Type: pirpc.EventAutoRetryStart}))
	show("get_state #1 answered", d.OnBarrier(1, pirpc.BarrierState{}))
	show("agent_start", d.OnEvent(&pirpc.Event{Type: pirpc.EventAgentStart}))
	show("agent_end", d.OnEvent(&pirpc.Event{Type: pirpc.EventAgentEnd}))
	show("get_state #2 answered", d.OnBarrier(2, pirpc.BarrierState{}))
	// Output:
	// agent_start            barrier=0 settled=false
	// agent_end              barrier=1 settled=false
	// auto_retry_start       barrier=0 settled=false
	// get_state #1 answered  barrier=0 settled=false
	// agent_start            barrier=0 settled=false
	// agent_end              barrier=2 settled=false
	// get_state #2 answered  barrier=0 settled=true
}

func ExampleEncodeCommand() {
	line, _ := pirpc.EncodeCommand("7", pirpc.Prompt{Message: "say: hi", StreamingBehavior: pirpc.StreamingFollowUp})
	fmt.Println(string(line))
	line, _ = pirpc.EncodeCommand("", pirpc.ExtensionUIResponse{ID: "u1", Confirmed: new(true)})
	fmt.Println(string(line))
	// Output:
	// {"id":"7","type":"prompt","message":"say: hi","streamingBehavior":"followUp"}
	// {"type":"extension_ui_response","id":"u1","confirmed":true}
}
