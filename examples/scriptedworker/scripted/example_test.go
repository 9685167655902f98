package scripted_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"example.com/pifleet/examples/scriptedworker/scripted"
)

// A worker answers one prompt: the response to the command first, then
// the run's events, the last of which is agent_end. Closing stdin ends it
// (exit status 0), as it ends pi.
func Example() {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	exit := make(chan int, 1)
	go func() {
		exit <- scripted.Main([]string{"--mode", "rpc", "--no-session"}, inR, outW, io.Discard)
		outW.Close()
	}()
	go fmt.Fprintln(inW, `{"id":"1","type":"prompt","message":"say: hello"}`)

	lines := bufio.NewScanner(outR)
	for lines.Scan() {
		var ev struct {
			Type    string `json:"type"`
			Command string `json:"command"`
			Message struct {
				Role    string `json:"role"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			fmt.Println("not JSON:", err)
			return
		}
		switch {
		case ev.Type == "response":
			fmt.Println("response to", ev.Command)
		case ev.Type == "message_end" && ev.Message.Role == "assistant":
			fmt.Println("assistant:", ev.Message.Content[0].Text)
		case ev.Type == "agent_start" || ev.Type == "agent_end":
			fmt.Println(ev.Type)
		}
		if ev.Type == "agent_end" {
			break
		}
	}
	inW.Close()
	go io.Copy(io.Discard, outR)
	fmt.Println("exit status", <-exit)
	// Output:
	// response to prompt
	// agent_start
	// assistant: hello
	// agent_end
	// exit status 0
}
