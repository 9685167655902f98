package trust

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"example.com/pifleet/transport/identity"
)

var buildbox = identity.Identity{Machine: "buildbox", User: "ana@github"}

// countingPrompter answers p and counts the questions it was asked.
type countingPrompter struct {
	mu    sync.Mutex
	asked []identity.Identity
	p     Policy
	err   error
}

func (c *countingPrompter) Ask(_ context.Context, id identity.Identity) (Policy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, id)
	return c.p, c.err
}

func (c *countingPrompter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.asked)
}

// mustNotAsk fails the test if a question is put.
func mustNotAsk(t *testing.T) Prompter {
	return PrompterFunc(func(_ context.Context, id identity.Identity) (Policy, error) {
		t.Errorf("asked about %s, which is decided", id)
		return Deny, errors.New("must not ask")
	})
}

// Seed §5, allow branch: unknown → asked once → stored → known forever,
// restarts included.
func TestFirstContactAllowIsAskedOnceAndStored(t *testing.T) {
	path := dbPath(t)
	prompter := &countingPrompter{p: Allow}
	s, err := Open(path, WithPrompter(prompter), WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		p, err := s.Decide(t.Context(), buildbox)
		if err != nil || p != Allow {
			t.Fatalf("Decide = %q, %v; want allow", p, err)
		}
	}
	if prompter.count() != 1 || prompter.asked[0] != buildbox {
		t.Errorf("asked %v, want exactly buildbox once", prompter.asked)
	}
	d, ok, err := s.Get("buildbox")
	want := Decision{Machine: "buildbox", User: "ana@github", Policy: Allow, DecidedAt: t0}
	if err != nil || !ok || d != want {
		t.Errorf("stored %+v, %v, %v; want %+v", d, ok, err, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The server restarts: the decision is still there, nobody is asked.
	s = openStore(t, path, WithPrompter(mustNotAsk(t)))
	if p, err := s.Decide(t.Context(), buildbox); err != nil || p != Allow {
		t.Errorf("after restart Decide = %q, %v", p, err)
	}
}

// Seed §5, deny branch: the deny is stored and enforced on the next
// contact without asking.
func TestFirstContactDenyIsStoredAndEnforced(t *testing.T) {
	path := dbPath(t)
	prompter := &countingPrompter{p: Deny}
	s, err := Open(path, WithPrompter(prompter))
	if err != nil {
		t.Fatal(err)
	}
	whois, err := identity.ParseStatic("127.0.0.2=buildbox/ana@github")
	if err != nil {
		t.Fatal(err)
	}
	gate := ServerGate(whois, s)
	remote := mustAddrPort("127.0.0.2:40001")

	for range 2 {
		id, p, err := gate(t.Context(), remote)
		if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrDenied) || p != Deny || id != buildbox {
			t.Fatalf("gate = %v, %q, %v; want refused as denied", id, p, err)
		}
	}
	if prompter.count() != 1 {
		t.Errorf("asked %d times, want once", prompter.count())
	}
	s.Close()

	s = openStore(t, path, WithPrompter(mustNotAsk(t)))
	_, _, err = ServerGate(whois, s)(t.Context(), remote)
	if !errors.Is(err, ErrDenied) {
		t.Errorf("after restart: %v, want the stored deny", err)
	}
}

// Many connections of one new machine arrive together: one question, one
// answer for all of them.
func TestConcurrentFirstContactAsksExactlyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var asked atomic.Int32
		s := openStore(t, dbPath(t), WithPrompter(PrompterFunc(func(context.Context, identity.Identity) (Policy, error) {
			asked.Add(1)
			<-release // the operator takes a while to answer
			return Steer, nil
		})))

		const conns = 64
		results := make(chan error, conns)
		for range conns {
			go func() {
				p, err := s.Decide(context.Background(), buildbox)
				if err == nil && p != Steer {
					err = errors.New("got " + string(p))
				}
				results <- err
			}()
		}
		synctest.Wait() // all 64 are in Decide: one asking, the rest waiting
		if n := asked.Load(); n != 1 {
			t.Fatalf("%d questions while %d connections wait, want 1", n, conns)
		}
		close(release)
		for range conns {
			if err := <-results; err != nil {
				t.Error(err)
			}
		}
		if n := asked.Load(); n != 1 {
			t.Errorf("asked %d times, want 1", n)
		}
		// Other machines are asked on their own.
		if _, err := s.Decide(context.Background(), identity.Identity{Machine: "ci-runner-3", User: "tagged-devices"}); err != nil {
			t.Fatal(err)
		}
		if n := asked.Load(); n != 2 {
			t.Errorf("second machine: asked %d times in all, want 2", n)
		}
	})
}

// No answer: refused for now, nothing stored, asked again next time.
func TestPrompterFailureRefusesAndStoresNothing(t *testing.T) {
	failure := errors.New("terminal closed")
	prompter := &countingPrompter{err: failure}
	s := openStore(t, dbPath(t), WithPrompter(prompter))

	p, err := s.Decide(t.Context(), buildbox)
	if p != Deny || !errors.Is(err, ErrPromptFailed) || !errors.Is(err, failure) {
		t.Fatalf("Decide = %q, %v; want deny with ErrPromptFailed wrapping the cause", p, err)
	}
	if pe, _ := errors.AsType[*PromptError](err); pe.Identity != buildbox {
		t.Errorf("PromptError names %v", pe.Identity)
	}
	if _, ok, _ := s.Get("buildbox"); ok {
		t.Fatal("a failed question stored a decision")
	}

	prompter.err, prompter.p = nil, Allow
	if p, err := s.Decide(t.Context(), buildbox); p != Allow || err != nil {
		t.Errorf("next contact = %q, %v", p, err)
	}
	if prompter.count() != 2 {
		t.Errorf("asked %d times, want 2 (the failure is not remembered)", prompter.count())
	}
}

func TestPrompterInvalidAnswerOrNoPrompter(t *testing.T) {
	s := openStore(t, dbPath(t), WithPrompter(Fixed("maybe")))
	if p, err := s.Decide(t.Context(), buildbox); p != Deny || !errors.Is(err, ErrPromptFailed) || !errors.Is(err, ErrBadPolicy) {
		t.Errorf("invalid answer: %q, %v", p, err)
	}
	s = openStore(t, dbPath(t))
	if p, err := s.Decide(t.Context(), buildbox); p != Deny || !errors.Is(err, ErrNoPrompter) {
		t.Errorf("no prompter: %q, %v", p, err)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Errorf("stored %v", list)
	}
}

// A connection that gives up while another one's question is open gets
// its ctx error; the question goes on for the others.
func TestWaiterGivesUpQuestionGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		s := openStore(t, dbPath(t), WithPrompter(PrompterFunc(func(context.Context, identity.Identity) (Policy, error) {
			<-release
			return Allow, nil
		})))
		leader := make(chan error, 1)
		go func() {
			_, err := s.Decide(context.Background(), buildbox)
			leader <- err
		}()
		synctest.Wait()

		ctx, cancel := context.WithCancel(context.Background())
		waiter := make(chan error, 1)
		go func() {
			p, err := s.Decide(ctx, buildbox)
			if p != Deny {
				err = errors.Join(err, errors.New("waiter that gave up got "+string(p)))
			}
			waiter <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-waiter; !errors.Is(err, context.Canceled) {
			t.Errorf("waiter: %v, want Canceled", err)
		}
		close(release)
		if err := <-leader; err != nil {
			t.Errorf("leader: %v", err)
		}
		if d, ok, _ := s.Get("buildbox"); !ok || d.Policy != Allow {
			t.Errorf("stored %+v, %v", d, ok)
		}
	})
}

// The asking connection drops: the question fails for everyone waiting,
// nothing is stored.
func TestAskingConnectionGoneFailsTheQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openStore(t, dbPath(t), WithPrompter(PrompterFunc(func(ctx context.Context, _ identity.Identity) (Policy, error) {
			<-ctx.Done()
			return "", ctx.Err()
		})))
		ctx, cancel := context.WithCancel(context.Background())
		results := make(chan error, 2)
		go func() { _, err := s.Decide(ctx, buildbox); results <- err }()
		synctest.Wait()
		go func() { _, err := s.Decide(context.Background(), buildbox); results <- err }()
		synctest.Wait()
		cancel()
		for range 2 {
			if err := <-results; !errors.Is(err, ErrPromptFailed) || !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want a failed question caused by Canceled", err)
			}
		}
		if _, ok, _ := s.Get("buildbox"); ok {
			t.Error("stored a decision nobody made")
		}
	})
}

// An operator's `trust set` while the question is open wins.
func TestSetWhileAskingWins(t *testing.T) {
	var s *Store
	s = openStore(t, dbPath(t), WithPrompter(PrompterFunc(func(context.Context, identity.Identity) (Policy, error) {
		if _, err := s.Set("buildbox", Deny); err != nil {
			t.Error(err)
		}
		return Steer, nil
	})))
	if p, err := s.Decide(t.Context(), buildbox); p != Deny || err != nil {
		t.Errorf("Decide = %q, %v; want the operator's deny", p, err)
	}
}

// A known machine that changed hands is a new first contact: asked
// again, and the answer (deny here) replaces the decision.
func TestKnownMachineOfAnotherUserIsAskedAgain(t *testing.T) {
	prompter := &countingPrompter{p: Steer}
	s := openStore(t, dbPath(t), WithPrompter(prompter))
	if _, err := s.Decide(t.Context(), buildbox); err != nil {
		t.Fatal(err)
	}
	eve := identity.Identity{Machine: "buildbox", User: "eve@example.com"}
	prompter.p = Deny
	if p, err := s.Decide(t.Context(), eve); p != Deny || err != nil {
		t.Fatalf("Decide = %q, %v; want the new answer", p, err)
	}
	if prompter.count() != 2 || prompter.asked[1] != eve {
		t.Errorf("asked %v", prompter.asked)
	}
	if d, _, _ := s.Get("buildbox"); d.User != eve.User || d.Policy != Deny {
		t.Errorf("stored %+v", d)
	}
	// No answer for the changed owner: refused, the old decision stays.
	s = openStore(t, dbPath(t), WithPrompter(Fixed(Steer)))
	s.Decide(t.Context(), buildbox)
	s.prompter = &countingPrompter{err: errors.New("nobody there")}
	if p, err := s.Decide(t.Context(), eve); p != Deny || !errors.Is(err, ErrPromptFailed) {
		t.Errorf("unanswered: %q, %v", p, err)
	}
	if d, _, _ := s.Get("buildbox"); d.User != buildbox.User || d.Policy != Steer {
		t.Errorf("kept %+v", d)
	}
}

// Seed §5 for agents that dial in: the key proven at first contact is
// stored with the decision and enforced after; another key is a new first
// contact; a decision made without a key takes the first one proven.
func TestDecisionIsBoundToTheKey(t *testing.T) {
	prompter := &countingPrompter{p: Steer}
	path := dbPath(t)
	s := openStore(t, path, WithPrompter(prompter))
	if p, err := s.DecideKey(t.Context(), buildbox, "ed25519:one"); p != Steer || err != nil {
		t.Fatalf("first contact: %q, %v", p, err)
	}
	if d, _, _ := s.Get("buildbox"); d.Key != "ed25519:one" {
		t.Fatalf("stored %+v", d)
	}
	if p, err := s.DecideKey(t.Context(), buildbox, "ed25519:one"); p != Steer || err != nil || prompter.count() != 1 {
		t.Fatalf("same key: %q, %v, asked %d", p, err, prompter.count())
	}
	prompter.p = Deny
	if p, err := s.DecideKey(t.Context(), buildbox, "ed25519:two"); p != Deny || err != nil || prompter.count() != 2 {
		t.Fatalf("another key: %q, %v, asked %d", p, err, prompter.count())
	}
	if d, _, _ := s.Get("buildbox"); d.Key != "ed25519:two" || d.Policy != Deny {
		t.Errorf("after the new first contact %+v", d)
	}
	// trust set before the machine ever connected: its first key is taken.
	if _, err := s.Set("ci-runner", Allow); err != nil {
		t.Fatal(err)
	}
	ci := identity.Identity{Machine: "ci-runner", User: "tagged"}
	if p, err := s.DecideKey(t.Context(), ci, "ed25519:ci"); p != Allow || err != nil || prompter.count() != 2 {
		t.Fatalf("decided beforehand: %q, %v, asked %d", p, err, prompter.count())
	}
	if d, _, _ := s.Get("ci-runner"); d.Key != "ed25519:ci" || d.User != "tagged" {
		t.Errorf("recorded %+v", d)
	}
}

func BenchmarkDecideKnown(b *testing.B) {
	s, err := Open(b.TempDir()+"/trust.db", WithPrompter(Fixed(Allow)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Decide(b.Context(), buildbox); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Decide(b.Context(), buildbox); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecideFirstContact(b *testing.B) {
	s, err := Open(b.TempDir()+"/trust.db", WithPrompter(Fixed(Allow)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++ // a new machine each time: ask, then one fsync'ed transaction
		if _, err := s.Decide(b.Context(), identity.Identity{Machine: "m" + strconv.Itoa(i), User: "u"}); err != nil {
			b.Fatal(err)
		}
	}
}
