package trust

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"example.com/pifleet/transport/identity"
)

// Prompter answers the first-contact question: may this machine join the
// fleet, and with which policy? An error means "no answer": the
// connection is refused and nothing is stored.
type Prompter interface {
	Ask(ctx context.Context, id identity.Identity) (Policy, error)
}

// PrompterFunc adapts a function to the Prompter interface.
type PrompterFunc func(ctx context.Context, id identity.Identity) (Policy, error)

// Ask calls f.
func (f PrompterFunc) Ask(ctx context.Context, id identity.Identity) (Policy, error) {
	return f(ctx, id)
}

// Fixed returns a Prompter that gives the same answer to every question,
// for unattended servers: Fixed(Deny) admits only machines set
// beforehand with `trust set`.
func Fixed(p Policy) Prompter {
	return PrompterFunc(func(context.Context, identity.Identity) (Policy, error) { return p, nil })
}

// ErrNoPrompter: the store has no prompter, so unknown machines are
// refused.
var ErrNoPrompter = errors.New("trust: no prompter configured for first contact")

type noPrompter struct{}

func (noPrompter) Ask(context.Context, identity.Identity) (Policy, error) {
	return "", ErrNoPrompter
}

// ErrNoAnswer: the terminal gave no usable answer (end of input, or too
// many answers that were none of y, s, n).
var ErrNoAnswer = errors.New("trust: no answer on the terminal")

// MaxTerminalAttempts is how many unusable answers Terminal accepts before
// it gives up.
const MaxTerminalAttempts = 3

// Terminal asks the first-contact question on a terminal: it writes the
// question to Out and reads one line from In. "y", "yes" or "allow" allow
// (view and spawn); "s" or "steer" give full control; "n", "no" or "deny"
// deny. An empty line is not an answer: a stray Enter must not admit
// anyone. Questions are asked one at a time. Safe for concurrent use.
type Terminal struct {
	in   *bufio.Reader
	out  io.Writer
	turn chan struct{} // holds a token while a question is on screen

	// pending delivers the line of a read still in progress, left behind
	// by a question whose ctx ended (reads cannot be interrupted). Guarded
	// by turn.
	pending chan lineResult
}

type lineResult struct {
	line string
	err  error
}

// NewTerminal returns a Terminal reading answers from in and writing
// questions to out (typically os.Stdin and os.Stderr).
func NewTerminal(in io.Reader, out io.Writer) *Terminal {
	return &Terminal{in: bufio.NewReader(in), out: out, turn: make(chan struct{}, 1)}
}

// Ask writes the question for id and waits for an answer or for ctx to
// end.
func (t *Terminal) Ask(ctx context.Context, id identity.Identity) (Policy, error) {
	if err := context.Cause(ctx); err != nil {
		return "", err
	}
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
	defer func() { <-t.turn }()

	for attempt := 1; ; attempt++ {
		fmt.Fprintf(t.out, "%s wants to join the fleet. Allow? [y]es = view and spawn, [s]teer = full control, [n]o = deny: ", id)
		line, err := t.readLine(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				fmt.Fprintln(t.out)
				return "", fmt.Errorf("%w: %w", ErrNoAnswer, err)
			}
			fmt.Fprintln(t.out, "\n(question withdrawn)")
			return "", err
		}
		if p, ok := parseAnswer(line); ok {
			return p, nil
		}
		if attempt == MaxTerminalAttempts {
			return "", fmt.Errorf("%w: %d answers that were none of y, s, n", ErrNoAnswer, attempt)
		}
		fmt.Fprintf(t.out, "%q is not an answer; type y, s or n.\n", strings.TrimSpace(line))
	}
}

// readLine reads one line, giving up when ctx ends; the read itself then
// goes on, and its line answers the next question.
func (t *Terminal) readLine(ctx context.Context) (string, error) {
	if t.pending == nil {
		ch := make(chan lineResult, 1)
		t.pending = ch
		go func() {
			line, err := t.in.ReadString('\n')
			if err != nil && line != "" && errors.Is(err, io.EOF) {
				err = nil // a last line without newline is still an answer
			}
			ch <- lineResult{line, err}
		}()
	}
	select {
	case r := <-t.pending:
		t.pending = nil
		return r.line, r.err
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// parseAnswer maps a terminal answer to a policy.
func parseAnswer(line string) (Policy, bool) {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes", "allow":
		return Allow, true
	case "s", "steer":
		return Steer, true
	case "n", "no", "deny":
		return Deny, true
	}
	return "", false
}
