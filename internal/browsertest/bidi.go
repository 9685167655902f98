package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/coder/websocket"
)

// bidi is a WebDriver BiDi connection: commands with numbered answers,
// and events passed to a handler, over one websocket. Firefox speaks it
// natively; the protocol is https://w3c.github.io/webdriver-bidi/.
type bidi struct {
	ws     *websocket.Conn
	events func(method string, params json.RawMessage)

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan bidiMessage
	err     error // why the connection ended; set once, before done closes

	done chan struct{} // closed when the read loop ends
}

// bidiMessage is any message the browser sends: the answer to a command
// (type success or error, with its id) or an event.
type bidiMessage struct {
	Type   string          `json:"type"`
	ID     *int64          `json:"id"`
	Result json.RawMessage `json:"result"`
	// Error and Message are an error answer's code and description.
	Error   string `json:"error"`
	Message string `json:"message"`
	// Method and Params are an event's.
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// BiDiError is a command the browser refused, with its error code (for
// example "no such element" or "invalid argument").
type BiDiError struct {
	Command string
	Code    string
	Message string
}

func (e *BiDiError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Command, e.Code, e.Message)
}

// errBiDiClosed is a command sent or waiting when the connection ended.
var errBiDiClosed = errors.New("webdriver bidi connection closed")

// ErrBadBiDiMessage is a message from the browser that is not BiDi.
var ErrBadBiDiMessage = errors.New("not a webdriver bidi message")

// parseBiDi decodes one message from the browser.
func parseBiDi(data []byte) (bidiMessage, error) {
	var m bidiMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return bidiMessage{}, fmt.Errorf("%w: %v", ErrBadBiDiMessage, err)
	}
	switch m.Type {
	case "success", "error":
		if m.ID == nil && m.Type == "success" {
			return bidiMessage{}, fmt.Errorf("%w: an answer without an id", ErrBadBiDiMessage)
		}
	case "event":
		if m.Method == "" {
			return bidiMessage{}, fmt.Errorf("%w: an event without a method", ErrBadBiDiMessage)
		}
	default:
		return bidiMessage{}, fmt.Errorf("%w: type %q", ErrBadBiDiMessage, m.Type)
	}
	return m, nil
}

// dialBiDi connects to url (ws://127.0.0.1:PORT/session) and reads
// until the connection ends; events go to events, on the read loop.
func dialBiDi(ctx context.Context, url string, events func(string, json.RawMessage)) (*bidi, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	// Screenshots and big results come in one message.
	ws.SetReadLimit(64 << 20)
	c := &bidi{ws: ws, events: events, pending: map[int64]chan bidiMessage{}, done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

func (c *bidi) readLoop() {
	defer close(c.done)
	for {
		_, data, err := c.ws.Read(context.Background())
		if err == nil {
			var m bidiMessage
			if m, err = parseBiDi(data); err == nil {
				c.dispatch(m)
				continue
			}
		}
		c.mu.Lock()
		c.err = err
		for id, ch := range c.pending {
			close(ch)
			delete(c.pending, id)
		}
		c.mu.Unlock()
		c.ws.CloseNow()
		return
	}
}

func (c *bidi) dispatch(m bidiMessage) {
	if m.Type == "event" {
		if c.events != nil {
			c.events(m.Method, m.Params)
		}
		return
	}
	if m.ID == nil {
		return // an error about a message without an id: nothing waits for it
	}
	c.mu.Lock()
	ch := c.pending[*m.ID]
	delete(c.pending, *m.ID)
	c.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

// call sends a command and decodes its result into result (unless nil).
func (c *bidi) call(ctx context.Context, method string, params, result any) error {
	if params == nil {
		params = struct{}{}
	}
	ch := make(chan bidiMessage, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s: %w (%v)", method, errBiDiClosed, err)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	msg, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		forget()
		return err
	}
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		forget()
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: %w", method, errBiDiClosed)
		}
		if m.Type == "error" {
			return &BiDiError{Command: method, Code: m.Error, Message: m.Message}
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(m.Result, result); err != nil {
			return fmt.Errorf("%s: result: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		forget()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// close ends the connection and waits for its read loop.
func (c *bidi) close() {
	c.ws.CloseNow()
	<-c.done
}
