package trust

import (
	"context"
	"errors"
	"fmt"

	"example.com/pifleet/transport/identity"
)

// ErrPromptFailed: nobody answered the first-contact question (the
// prompter failed, gave an invalid answer, or there is no prompter). The
// connection is refused and nothing is stored, so the next contact asks
// again. A *PromptError carries the details.
var ErrPromptFailed = errors.New("trust: first-contact question not answered")

// PromptError reports a first-contact question that got no valid answer
// (errors.Is(err, ErrPromptFailed)).
type PromptError struct {
	Identity identity.Identity
	Err      error
}

func (e *PromptError) Error() string {
	return fmt.Sprintf("trust: first contact of %s not answered, refused for now: %v", e.Identity, e.Err)
}

// Is makes errors.Is(err, ErrPromptFailed) true.
func (e *PromptError) Is(target error) bool { return target == ErrPromptFailed }

// Unwrap returns the prompter's error.
func (e *PromptError) Unwrap() error { return e.Err }

// flight is one first-contact question in progress. Connections of the
// same machine that arrive meanwhile wait for its answer instead of
// asking again.
type flight struct {
	done   chan struct{} // closed when policy and err are final
	policy Policy
	err    error
}

// Decide returns the policy for a connecting machine (seed state-flow §5).
//
// A machine with a stored decision gets it. For a machine seen for the
// first time the Prompter is asked exactly once, however many of its
// connections arrive meanwhile; the answer (deny included) is stored
// before Decide returns, and every waiting connection gets it.
//
// On any error the policy is Deny and the caller must refuse the
// connection. A prompter failure stores nothing (a *PromptError), so the
// machine's next contact asks again; a ctx that ends while waiting for
// another connection's question returns ctx's error.
//
// The question runs under the ctx of the connection that asked it; if
// that ends, the question fails for all connections waiting on it.
func (s *Store) Decide(ctx context.Context, id identity.Identity) (Policy, error) {
	if err := checkMachine(id.Machine); err != nil {
		return Deny, err
	}
	if d, ok, err := s.Get(id.Machine); err != nil || ok {
		return s.known(d, id, err)
	}

	s.mu.Lock()
	if f, ok := s.flights[id.Machine]; ok {
		s.mu.Unlock()
		return wait(ctx, f)
	}
	// Look again under the lock: a question that ended between Get and
	// Lock has stored its answer, and must not be asked twice.
	if d, ok, err := s.Get(id.Machine); err != nil || ok {
		s.mu.Unlock()
		return s.known(d, id, err)
	}
	f := &flight{
		done:   make(chan struct{}),
		policy: Deny,
		err:    &PromptError{Identity: id, Err: errors.New("prompter did not return")},
	}
	s.flights[id.Machine] = f
	s.mu.Unlock()

	defer func() {
		// The answer is stored (or nothing is) before the flight ends:
		// later callers find it in the store.
		s.mu.Lock()
		delete(s.flights, id.Machine)
		s.mu.Unlock()
		close(f.done)
	}()
	f.policy, f.err = s.ask(ctx, id)
	return f.policy, f.err
}

// known returns a stored decision, noting when the machine's owner has
// changed since.
func (s *Store) known(d Decision, id identity.Identity, err error) (Policy, error) {
	if err != nil {
		return Deny, err
	}
	if d.User != "" && id.User != "" && d.User != id.User {
		s.log.Warn().Str("machine", id.Machine).Str("decided_for", d.User).Str("user", id.User).
			Str("policy", string(d.Policy)).Msg("machine now belongs to another user; the stored policy still applies")
	}
	return d.Policy, nil
}

// ask puts the first-contact question and stores the answer.
func (s *Store) ask(ctx context.Context, id identity.Identity) (Policy, error) {
	s.log.Info().Str("machine", id.Machine).Str("user", id.User).Msg("first contact: asking")
	p, err := s.prompter.Ask(ctx, id)
	if err == nil && !p.Valid() {
		err = fmt.Errorf("%w %q from the prompter", ErrBadPolicy, p)
	}
	if err != nil {
		s.log.Warn().Str("machine", id.Machine).Err(err).Msg("first contact: no answer, refused and not stored")
		return Deny, &PromptError{Identity: id, Err: err}
	}
	d, err := s.putIfAbsent(Decision{Machine: id.Machine, User: id.User, Policy: p, DecidedAt: s.stamp()})
	if err != nil {
		return Deny, err
	}
	if d.Policy != p {
		s.log.Warn().Str("machine", id.Machine).Str("answer", string(p)).Str("policy", string(d.Policy)).
			Msg("first contact: a decision was set while asking; it wins over the answer")
	}
	s.log.Info().Str("machine", id.Machine).Str("policy", string(d.Policy)).Msg("first contact: decided")
	return d.Policy, nil
}

func wait(ctx context.Context, f *flight) (Policy, error) {
	select {
	case <-f.done:
		return f.policy, f.err
	case <-ctx.Done():
		return Deny, fmt.Errorf("trust: waiting for the first-contact answer: %w", context.Cause(ctx))
	}
}
