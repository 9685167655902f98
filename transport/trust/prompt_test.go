package trust

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"

	"example.com/pifleet/internal/syncbuf"
	"example.com/pifleet/transport/identity"
)

func TestTerminalAnswers(t *testing.T) {
	tests := []struct {
		input string
		want  Policy
		err   error
	}{
		{"y\n", Allow, nil},
		{"YES\r\n", Allow, nil},
		{"allow\n", Allow, nil},
		{"s\n", Steer, nil},
		{" steer \n", Steer, nil},
		{"n\n", Deny, nil},
		{"deny\n", Deny, nil},
		{"s", Steer, nil}, // last line without newline
		{"maybe\n\ny\n", Allow, nil},
		{"\n\n\ny\n", "", ErrNoAnswer}, // three non-answers: a stray Enter never admits
		{"", "", io.EOF},
		{"ok", "", ErrNoAnswer},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		term := NewTerminal(strings.NewReader(tt.input), &out)
		p, err := term.Ask(t.Context(), buildbox)
		if p != tt.want || !errors.Is(err, tt.err) || (tt.err != nil) != (err != nil) {
			t.Errorf("input %q: %q, %v; want %q, %v", tt.input, p, err, tt.want, tt.err)
		}
		if tt.err != nil && !errors.Is(err, ErrNoAnswer) {
			t.Errorf("input %q: err %v is not ErrNoAnswer", tt.input, err)
		}
		if !strings.HasPrefix(out.String(), "buildbox (ana@github) wants to join the fleet. Allow? [y]es = view and spawn, [s]teer = full control, [n]o = deny: ") {
			t.Errorf("input %q: question %q", tt.input, out.String())
		}
	}
}

func TestTerminalExplainsAndReasks(t *testing.T) {
	var out bytes.Buffer
	p, err := NewTerminal(strings.NewReader("sure\nn\n"), &out).Ask(t.Context(), buildbox)
	if p != Deny || err != nil {
		t.Fatalf("%q, %v", p, err)
	}
	if got := strings.Count(out.String(), "wants to join"); got != 2 {
		t.Errorf("asked %d times, want 2:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), `"sure" is not an answer; type y, s or n.`) {
		t.Errorf("no explanation in %q", out.String())
	}
}

// A withdrawn question (its connection went away) does not lose the
// terminal: the line typed next answers the next question.
func TestTerminalWithdrawnQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in, typist := io.Pipe()
		defer typist.Close()
		var out syncbuf.Buffer
		term := NewTerminal(in, &out)

		ctx, cancel := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() { _, err := term.Ask(ctx, buildbox); first <- err }()
		synctest.Wait() // the question is on screen, nobody has typed
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("withdrawn question: %v", err)
		}
		if !strings.Contains(out.String(), "(question withdrawn)") {
			t.Errorf("the screen does not say the question was withdrawn: %q", out.String())
		}

		second := make(chan Policy, 1)
		go func() {
			p, err := term.Ask(context.Background(), buildbox)
			if err != nil {
				t.Error(err)
			}
			second <- p
		}()
		if _, err := io.WriteString(typist, "s\n"); err != nil {
			t.Fatal(err)
		}
		if p := <-second; p != Steer {
			t.Errorf("second question answered %q, want steer", p)
		}
	})
}

// Two machines at once: one question on screen at a time.
func TestTerminalOneQuestionAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in, typist := io.Pipe()
		defer typist.Close()
		var out syncbuf.Buffer
		term := NewTerminal(in, &out)

		answers := make(chan Policy, 2)
		for range 2 {
			go func() {
				p, err := term.Ask(context.Background(), buildbox)
				if err != nil {
					t.Error(err)
				}
				answers <- p
			}()
		}
		synctest.Wait()
		if n := strings.Count(out.String(), "wants to join"); n != 1 {
			t.Fatalf("%d questions on screen at once", n)
		}
		io.WriteString(typist, "y\n")
		<-answers
		synctest.Wait()
		if n := strings.Count(out.String(), "wants to join"); n != 2 {
			t.Fatalf("second question not asked after the first answer (%d)", n)
		}
		io.WriteString(typist, "n\n")
		<-answers
	})
}

func TestTerminalCancelledBeforeAsking(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out bytes.Buffer
	if _, err := NewTerminal(strings.NewReader("y\n"), &out).Ask(ctx, buildbox); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("asked anyway: %q", out.String())
	}
}

func TestFixedAndPrompterFunc(t *testing.T) {
	if p, err := Fixed(Steer).Ask(t.Context(), buildbox); p != Steer || err != nil {
		t.Errorf("Fixed = %q, %v", p, err)
	}
	var got string
	f := PrompterFunc(func(_ context.Context, id identity.Identity) (Policy, error) {
		got = id.String()
		return Deny, nil
	})
	if p, _ := f.Ask(t.Context(), buildbox); p != Deny || got != "buildbox (ana@github)" {
		t.Errorf("PrompterFunc = %q, %q", p, got)
	}
}
