package trust

import (
	"context"
	"crypto/subtle"
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

// Decide returns the policy for a connecting machine.
//
// A machine with a stored decision gets it. For a machine seen for the
// first time the Prompter is asked exactly once, however many of its
// connections arrive meanwhile; the answer (deny included) is stored
// before Decide returns, and every waiting connection gets it. A known
// machine whose whois user is not the one the decision was made for is a
// new first contact: asked again, and the answer replaces the decision.
//
// On any error the policy is Deny and the caller must refuse the
// connection. A prompter failure stores nothing (a *PromptError), so the
// machine's next contact asks again; a ctx that ends while waiting for
// another connection's question returns ctx's error.
//
// The question runs under the ctx of the connection that asked it; if
// that ends, the question fails for all connections waiting on it.
func (s *Store) Decide(ctx context.Context, id identity.Identity) (Policy, error) {
	return s.decide(ctx, id, "")
}

// DecideKey is Decide for a peer that proved it holds key (an agent that
// dialled in): the decision is bound to the key. A stored decision made
// without a key (`trust set` before the machine ever connected) takes
// this one; a decision made for another key is a new first contact,
// asked again, whose answer replaces it.
func (s *Store) DecideKey(ctx context.Context, id identity.Identity, key string) (Policy, error) {
	return s.decide(ctx, id, key)
}

func (s *Store) decide(ctx context.Context, id identity.Identity, key string) (Policy, error) {
	if err := checkMachine(id.Machine); err != nil {
		return Deny, err
	}
	for {
		if d, ok, err := s.Get(id.Machine); err != nil || (ok && !stale(d, id, key)) {
			return s.known(d, id, key, err)
		}
		s.mu.Lock()
		if f, ok := s.flights[id.Machine]; ok {
			s.mu.Unlock()
			if _, err := wait(ctx, f); err != nil {
				return Deny, err
			}
			continue // decided meanwhile: for this key and user, or ask again
		}
		// Look again under the lock: a question that ended between Get and
		// Lock has stored its answer, and must not be asked twice.
		prev, ok, err := s.Get(id.Machine)
		if err != nil || (ok && !stale(prev, id, key)) {
			s.mu.Unlock()
			return s.known(prev, id, key, err)
		}
		f := &flight{
			done:   make(chan struct{}),
			policy: Deny,
			err:    &PromptError{Identity: id, Err: errors.New("prompter did not return")},
		}
		s.flights[id.Machine] = f
		s.mu.Unlock()
		var before *Decision
		if ok {
			before = &prev
		}
		func() {
			defer func() {
				// The answer is stored (or nothing is) before the flight
				// ends: later callers find it in the store.
				s.mu.Lock()
				delete(s.flights, id.Machine)
				s.mu.Unlock()
				close(f.done)
			}()
			f.policy, f.err = s.ask(ctx, id, key, before)
		}()
		return f.policy, f.err
	}
}

// stale reports whether stored decision d no longer speaks for the peer:
// the machine now belongs to another user, or it proved another key.
func stale(d Decision, id identity.Identity, key string) bool {
	return (d.User != "" && id.User != "" && d.User != id.User) ||
		(key != "" && d.Key != "" && !sameKeyText(d.Key, key))
}

// sameKeyText compares two keys' text in constant time.
func sameKeyText(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// known returns a stored decision; one made without a key or user takes
// the peer's (the first connection after `trust set`).
func (s *Store) known(d Decision, id identity.Identity, key string, err error) (Policy, error) {
	if err != nil {
		return Deny, err
	}
	if (key != "" && d.Key == "") || (d.User == "" && id.User != "") {
		next := d
		if next.Key == "" {
			next.Key = key
		}
		if next.User == "" {
			next.User = id.User
		}
		if stored, err := s.replace(&d, next); err != nil {
			s.log.Warn().Err(err).Str("machine", id.Machine).Msg("recording the machine's key")
		} else if stored == next && key != "" {
			s.log.Info().Str("machine", id.Machine).Str("key", key).Msg("key recorded with the stored decision")
		}
	}
	return d.Policy, nil
}

// ask puts the first-contact question and stores the answer. before is
// the decision it replaces (a new key or user), nil for a machine never
// seen.
func (s *Store) ask(ctx context.Context, id identity.Identity, key string, before *Decision) (Policy, error) {
	if before != nil {
		why := "its key changed"
		if before.User != "" && id.User != "" && before.User != id.User {
			why = "it now belongs to " + id.User + ", not " + before.User
		}
		s.log.Warn().Str("machine", id.Machine).Str("user", id.User).Str("was", before.User).Str("key", key).
			Str("storedKey", before.Key).Str("policy", string(before.Policy)).
			Msg("known machine is a new first contact: " + why + "; asking again")
	} else {
		s.log.Info().Str("machine", id.Machine).Str("user", id.User).Str("key", key).Msg("first contact: asking")
	}
	p, err := s.prompter.Ask(ctx, id)
	if err == nil && !p.Valid() {
		err = fmt.Errorf("%w %q from the prompter", ErrBadPolicy, p)
	}
	if err != nil {
		s.log.Warn().Str("machine", id.Machine).Err(err).Msg("first contact: no answer, refused and not stored")
		return Deny, &PromptError{Identity: id, Err: err}
	}
	d, err := s.replace(before, Decision{Machine: id.Machine, User: id.User, Key: key, Policy: p, DecidedAt: s.stamp()})
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
