package dialer

// Parity with the upstream CtrlDialer's unit tests (notes §1.15, first
// list), on the engine with a scripted clock and a seeded random source.

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestParity_FirstFailureFromZero(t *testing.T) {
	cfg := testConfig()
	g := newEngineRig(t, cfg)
	g.dir.add("a", "10.0.0.1:9788")
	r := g.dialNow("a")
	g.finish("a", errRefused)

	if r.state() != StateNeedsDial {
		t.Fatalf("state %s, want NeedsDial", r.state())
	}
	if r.retryDelay != cfg.MinRetryInterval || r.attempts != 1 {
		t.Errorf("delay %v attempts %d, want %v and 1", r.retryDelay, r.attempts, cfg.MinRetryInterval)
	}
	if r.nextDial != g.now+cfg.MinRetryInterval || r.heapIndex < 0 {
		t.Errorf("next dial %v (heap %d), want %v on the heap", r.nextDial, r.heapIndex, g.now+cfg.MinRetryInterval)
	}
	if r.lastErr != errRefused {
		t.Errorf("last error %v", r.lastErr)
	}
}

func TestParity_FailuresNeverDecreaseDelay(t *testing.T) {
	cfg := DefaultConfig()
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var r record
		prev := time.Duration(0)
		for i := range 40 {
			r.failed(time.Duration(i)*time.Hour, &cfg, rng, errRefused)
			if r.retryDelay < prev {
				t.Fatalf("seed %d failure %d: delay fell from %v to %v", seed, i+1, prev, r.retryDelay)
			}
			if r.retryDelay < cfg.MinRetryInterval || r.retryDelay > cfg.MaxRetryInterval {
				t.Fatalf("seed %d failure %d: delay %v outside [Min, Max]", seed, i+1, r.retryDelay)
			}
			prev = r.retryDelay
		}
		if r.attempts != 40 {
			t.Fatalf("attempts %d, want 40", r.attempts)
		}
	}
}

func TestParity_DelayNeverExceedsMax(t *testing.T) {
	cfg := DefaultConfig()
	rng := testRand()
	r := record{retryDelay: 4 * time.Minute}
	for i := range 20 {
		r.failed(0, &cfg, rng, errRefused)
		if r.retryDelay > cfg.MaxRetryInterval {
			t.Fatalf("failure %d: delay %v above Max %v", i+1, r.retryDelay, cfg.MaxRetryInterval)
		}
	}
	if r.retryDelay != cfg.MaxRetryInterval {
		t.Errorf("after 20 failures from 4 min the delay is %v, want the cap", r.retryDelay)
	}
}

func TestParity_SuccessKeepsDelay(t *testing.T) {
	cfg := testConfig()
	g := newEngineRig(t, cfg)
	g.dir.add("a", "10.0.0.1:9788")
	r := g.dialNow("a")
	r.retryDelay, r.attempts = 30*time.Second, 5
	g.now += 2 * time.Second
	g.finish("a", nil)

	if r.state() != StateConnected || r.connectedAt != g.now {
		t.Fatalf("state %s connectedAt %v, want Connected at %v", r.state(), r.connectedAt, g.now)
	}
	if r.retryDelay != 30*time.Second || r.attempts != 5 {
		t.Errorf("delay %v attempts %d, want them preserved (30s, 5)", r.retryDelay, r.attempts)
	}
}

// connectedRig returns a rig with "a" Connected since connectedFor ago,
// with the given retry delay.
func connectedRig(t *testing.T, connectedFor, delay time.Duration) (*engineRig, *record) {
	g := newEngineRig(t, testConfig())
	g.dir.add("a", "10.0.0.1:9788", "10.0.0.2:9788")
	r := g.dialNow("a")
	r.retryDelay = delay
	r.attempts = 3
	r.addrIndex = 1
	g.finish("a", nil)
	g.now += connectedFor
	g.dir.setConnected("a", false)
	return g, r
}

func TestParity_NormalDisconnectResets(t *testing.T) {
	g, r := connectedRig(t, time.Minute, 30*time.Second)
	// The survival check was due long ago; run it late so that the loss is
	// reported by the notification, as in the upstream test.
	g.e.disconnected(g.now, "a")

	if r.state() != StateNeedsDial {
		t.Fatalf("state %s, want NeedsDial", r.state())
	}
	if r.retryDelay != 0 || r.attempts != 0 || r.addrIndex != 0 {
		t.Errorf("delay %v attempts %d index %d, want all reset", r.retryDelay, r.attempts, r.addrIndex)
	}
	if r.nextDial != g.now {
		t.Errorf("next dial %v, want now (%v)", r.nextDial, g.now)
	}
}

func TestParity_FastFailureContinuesBackoff(t *testing.T) {
	g, r := connectedRig(t, time.Second, 2*time.Second)
	g.e.disconnected(g.now, "a")

	if r.state() != StateNeedsDial {
		t.Fatalf("state %s, want NeedsDial", r.state())
	}
	if r.retryDelay < 2*time.Second || r.attempts != 4 {
		t.Errorf("delay %v attempts %d, want ≥ 2s and 4", r.retryDelay, r.attempts)
	}
	if r.nextDial <= g.now {
		t.Errorf("next dial %v, want after now (%v)", r.nextDial, g.now)
	}
	if r.addrIndex != 0 {
		t.Errorf("address index %d, want rotated from 1 to 0", r.addrIndex)
	}
}

// Upstream's rule for a loss while not Connected (reset, due now) is what a
// Disconnected report for an untracked target gets: a fresh record. For a
// record already in NeedsDial or Dialing the report is a duplicate and is
// dropped instead (TestFix_DuplicateDisconnectKeepsFastFailureBackoff).
func TestParity_LostWhileNotConnectedResets(t *testing.T) {
	g := newEngineRig(t, testConfig())
	g.dir.add("a", "10.0.0.1:9788")
	g.now = time.Hour
	g.e.disconnected(g.now, "a")

	r := g.rec("a")
	if r == nil || r.state() != StateNeedsDial {
		t.Fatalf("record %+v, want NeedsDial", r)
	}
	if r.retryDelay != 0 || r.nextDial != g.now {
		t.Errorf("delay %v next %v, want 0 and now", r.retryDelay, r.nextDial)
	}
}

func TestParity_SuccessThenQuickLossAccumulates(t *testing.T) {
	cfg := testConfig()
	g := newEngineRig(t, cfg)
	g.dir.add("a", "10.0.0.1:9788")
	g.e.updated(g.now, "a")
	for cycle := range 5 {
		g.e.runDue(g.now, allDue)
		r := g.rec("a")
		if r.state() != StateDialing {
			t.Fatalf("cycle %d: %s, want Dialing", cycle, r.state())
		}
		g.finish("a", nil)
		g.now += 100 * time.Millisecond
		g.dir.setConnected("a", false)
		g.e.disconnected(g.now, "a")
		g.now = r.nextDial
	}
	if r := g.rec("a"); r.retryDelay <= cfg.MinRetryInterval || r.attempts != 5 {
		t.Errorf("after five fast failures: delay %v attempts %d, want > %v and 5", r.retryDelay, r.attempts, cfg.MinRetryInterval)
	}
}
