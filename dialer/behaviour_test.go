package dialer

// The upstream README's documented behaviour that upstream never tested
// (notes §1.15, second list), on the real event loop in a synctest bubble.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

func TestBoot_NothingBeforeDialDelay(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := DefaultConfig()
		r := newRig(t, cfg)
		r.dir.add("a", "10.0.0.1:9788")
		r.dir.add("b", "10.0.0.2:9788")
		t0 := time.Now()
		r.start()
		r.d.Updated("a") // handled during the delay, acted on after it

		advance(cfg.DialDelay - time.Millisecond)
		if n := len(r.dials("")); n != 0 {
			t.Fatalf("%d dials before DialDelay", n)
		}
		r.mustStatus("a", StateNeedsDial) // the notification was recorded
		if _, ok := r.status("b"); ok {
			t.Fatal("b tracked before the first scan")
		}

		advance(time.Millisecond)
		got := r.dials("")
		if len(got) != 2 || got[0].id == got[1].id {
			t.Fatalf("dials at DialDelay: %+v, want a and b", got)
		}
		for _, d := range got {
			if d.at.Sub(t0) != cfg.DialDelay {
				t.Errorf("%s dialled %v after start, want exactly %v", d.id, d.at.Sub(t0), cfg.DialDelay)
			}
		}
	})
}

func TestBoot_StopDuringDialDelayReturnsPromptly(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.dir.add("a", "10.0.0.1:9788")
		t0 := time.Now()
		r.start()
		advance(time.Second)
		r.stop()
		if waited := time.Since(t0); waited != time.Second {
			t.Errorf("Run returned %v after start, want 1s (it must not wait out DialDelay)", waited)
		}
		if n := len(r.dials("")); n != 0 {
			t.Errorf("%d dials", n)
		}
	})
}

func TestScan_OneRecordPerEligibleTargetSpreadInListOrder(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		for _, id := range []string{"c", "a", "b"} {
			r.dir.add(id, id+".example:9788")
		}
		r.setScript(func(string, string) outcome { return outcome{err: errRefused, latency: time.Millisecond} })
		t0 := time.Now()
		r.start()
		synctest.Wait()

		all, err := r.d.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3 {
			t.Fatalf("%d records, want 3: %+v", len(all), all)
		}
		advance(time.Second / 2)
		got := r.dials("")
		if len(got) != 3 {
			t.Fatalf("%d dials, want 3", len(got))
		}
		for k, want := range []string{"c", "a", "b"} {
			if got[k].id != want || got[k].at.Sub(t0) != time.Duration(k)*cfg.ScanSpread {
				t.Errorf("dial %d: %s at +%v, want %s at +%v", k, got[k].id, got[k].at.Sub(t0), want, time.Duration(k)*cfg.ScanSpread)
			}
		}
	})
}

// Upstream's "disabled" and "group-mismatched" routers are, here, targets
// the Directory calls ineligible: listener groups are the directory's
// business (the fleet has none), so "empty groups mean default" has no
// counterpart in this package.
func TestScan_SkipsConnectedIneligibleAndAddresslessTargets(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("ok", "10.0.0.1:9788")
		r.dir.add("connected", "10.0.0.2:9788")
		r.dir.setConnected("connected", true)
		r.dir.add("disabled", "10.0.0.3:9788")
		r.dir.set("disabled", func(e *memEntry) { e.eligible = false })
		r.dir.add("noaddr")
		r.start()
		advance(time.Second)

		got := r.dials("")
		if len(got) != 1 || got[0].id != "ok" {
			t.Errorf("dials %+v, want only ok", got)
		}
		for _, id := range []string{"connected", "disabled", "noaddr"} {
			r.mustUntracked(id)
		}
	})
}

func TestScan_LeavesExistingRecordsUntouched(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.MinRetryInterval = 30 * time.Second
		cfg.ScanInterval = 10 * time.Second
		r := newRig(t, cfg)
		r.dir.add("a", "10.0.0.1:9788", "10.0.0.2:9788")
		r.setScript(func(string, string) outcome { return outcome{err: errRefused} })
		r.start()
		advance(5 * time.Second)
		before := r.mustStatus("a", StateNeedsDial)

		advance(10 * time.Second) // the scan at 10 s has run
		after := r.mustStatus("a", StateNeedsDial)
		if d := cmp.Diff(before, after); d != "" {
			t.Errorf("a periodic scan changed an existing record (-before +after):\n%s", d)
		}
	})
}

func TestScan_PeriodicScanPicksUpSilentlyAddedTargets(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		t0 := time.Now()
		r.start()
		advance(time.Minute)
		r.dir.add("late", "10.0.0.9:9788") // no notification

		advance(cfg.ScanInterval - time.Minute - time.Millisecond)
		if n := len(r.dials("late")); n != 0 {
			t.Fatalf("late dialled %d times before the periodic scan", n)
		}
		advance(time.Millisecond)
		got := r.dials("late")
		if len(got) != 1 || got[0].at.Sub(t0) != cfg.ScanInterval {
			t.Errorf("dials of late: %+v, want one at +%v", got, cfg.ScanInterval)
		}
	})
}

func TestDue_DispatchedInNextDialOrderNotBefore(t *testing.T) {
	g := newEngineRig(t, testConfig())
	for id, due := range map[string]time.Duration{"x": 3 * time.Second, "y": time.Second, "z": 2 * time.Second} {
		g.dir.add(id, id+":9788")
		g.e.updated(g.now, id)
		r := g.rec(id)
		r.nextDial = due
		g.e.due.schedule(r)
	}
	g.advance(2 * time.Second)
	var got []string
	for _, j := range g.started {
		got = append(got, j.id)
	}
	if !slices.Equal(got, []string{"y", "z"}) {
		t.Errorf("dialled %v by 2s, want [y z] (x is due at 3s)", got)
	}
	if s := g.rec("x").state(); s != StateNeedsDial {
		t.Errorf("x is %s, want NeedsDial", s)
	}
}

func TestEvaluate_RereadsAddresses_EmptyRemoves_IndexClamped(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788", "10.0.0.2:9788", "10.0.0.3:9788")
		r.setScript(func(string, string) outcome { return outcome{err: errRefused} })
		r.start()
		synctest.Wait()
		advance(r.mustStatus("a", StateNeedsDial).RetryDelay) // second dial, at .2
		if s := r.mustStatus("a", StateNeedsDial); s.AddrIndex != 2 {
			t.Fatalf("address index %d after two failures, want 2", s.AddrIndex)
		}

		// The list shrinks without a notification; the next evaluation
		// re-reads it and wraps the index into it.
		r.dir.set("a", func(e *memEntry) { e.addrs = []string{"10.0.0.2:9788", "10.0.0.1:9788"} })
		advance(r.mustStatus("a", StateNeedsDial).RetryDelay)
		got := r.dials("a")
		if last := got[len(got)-1]; last.addr != "10.0.0.1:9788" {
			t.Errorf("third dial at %s, want 10.0.0.1:9788 (index 2 wrapped into a list of 2)", last.addr)
		}

		r.dir.set("a", func(e *memEntry) { e.addrs = nil })
		advance(r.mustStatus("a", StateNeedsDial).RetryDelay)
		r.mustUntracked("a")
		if n := len(r.dials("a")); n != 3 {
			t.Errorf("%d dials, want 3", n)
		}
	})
}

func TestDial_AtMostOneInFlightPerTarget(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788")
		release := make(chan struct{})
		r.setScript(func(string, string) outcome { return outcome{release: release} })
		r.start()
		synctest.Wait()
		for range 10 {
			r.d.Updated("a")
			r.d.Disconnected("a")
			advance(time.Second)
		}
		r.mustStatus("a", StateDialing)
		if n := len(r.dials("a")); n != 1 {
			t.Errorf("%d dials of a, want 1 (the rig also fails on overlap)", n)
		}
		close(release)
		synctest.Wait()
		r.mustStatus("a", StateConnected)
	})
}

func TestPoolFull_BacksOffAndRequeues(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.PoolSize, cfg.QueueSize = 1, 1
		r := newRig(t, cfg)
		release := make(chan struct{})
		r.setScript(func(id, _ string) outcome {
			if id == "a" {
				return outcome{release: release}
			}
			return outcome{}
		})
		r.start()
		t0 := time.Now()
		r.dir.add("a", "10.0.0.1:9788")
		r.dir.add("b", "10.0.0.2:9788")
		r.dir.add("c", "10.0.0.3:9788", "10.0.0.4:9788")
		for _, id := range []string{"a", "b", "c"} {
			r.d.Updated(id)
		}
		synctest.Wait()

		r.mustStatus("a", StateDialing) // running
		r.mustStatus("b", StateDialing) // queued
		c := r.mustStatus("c", StateNeedsDial)
		want := TargetStatus{
			ID: "c", State: StateNeedsDial,
			Addresses: []string{"10.0.0.3:9788", "10.0.0.4:9788"}, AddrIndex: 1,
			Attempts: 1, RetryDelay: cfg.MinRetryInterval, NextDial: t0.Add(cfg.MinRetryInterval),
			LastError: ErrPoolFull.Error(),
		}
		if d := cmp.Diff(want, c); d != "" {
			t.Errorf("c after a full pool (-want +got):\n%s", d)
		}
		if s := r.d.Stats(); s.PoolFull != 1 || s.InFlight != 1 || s.Queued != 1 {
			t.Errorf("stats %+v, want 1 pool-full, 1 in flight, 1 queued", s)
		}

		close(release) // a connects, b runs and connects
		advance(cfg.MinRetryInterval)
		got := r.dials("c")
		if len(got) != 1 || got[0].addr != "10.0.0.4:9788" || got[0].at != t0.Add(cfg.MinRetryInterval) {
			t.Errorf("dials of c %+v, want one to the rotated address at +%v", got, cfg.MinRetryInterval)
		}
		if r.peak > cfg.PoolSize {
			t.Errorf("%d dials ran at once, pool is %d", r.peak, cfg.PoolSize)
		}
	})
}

func TestDialFailure_BacksOffAndRotatesSortedAddresses(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		r.dir.add("a", "10.0.0.3:9788", "10.0.0.1:9788", "10.0.0.2:9788", "10.0.0.1:9788")
		r.setScript(func(string, string) outcome { return outcome{err: errRefused} })
		r.start()
		synctest.Wait()

		var delays []time.Duration
		for range 6 {
			s := r.mustStatus("a", StateNeedsDial)
			if !slices.Equal(s.Addresses, []string{"10.0.0.1:9788", "10.0.0.2:9788", "10.0.0.3:9788"}) {
				t.Fatalf("addresses %v, want sorted without duplicates", s.Addresses)
			}
			delays = append(delays, s.RetryDelay)
			advance(s.RetryDelay)
		}
		got := r.dials("a")
		for k, d := range got {
			if want := []string{"10.0.0.1:9788", "10.0.0.2:9788", "10.0.0.3:9788"}[k%3]; d.addr != want {
				t.Errorf("dial %d at %s, want %s", k, d.addr, want)
			}
			if k > 0 {
				if gap := d.at.Sub(got[k-1].at); gap != delays[k-1] {
					t.Errorf("dial %d came %v after the failure, want the retry delay %v", k, gap, delays[k-1])
				}
			}
		}
		if delays[0] != cfg.MinRetryInterval || !slices.IsSorted(delays) {
			t.Errorf("delays %v: want Min first and never decreasing", delays)
		}
	})
}

func TestDialSuccess_SchedulesSurvivalCheckAfterWindow(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		r.dir.add("a", "10.0.0.1:9788")
		r.setScript(func(string, string) outcome { return outcome{latency: 200 * time.Millisecond} })
		r.start()
		t0 := time.Now()
		advance(200 * time.Millisecond)
		s := r.mustStatus("a", StateConnected)
		done := t0.Add(200 * time.Millisecond)
		if !s.ConnectedAt.Equal(done) || !s.NextDial.Equal(done.Add(cfg.FastFailureWindow)) {
			t.Errorf("connected at %v, check at %v; want %v and %v", s.ConnectedAt, s.NextDial, done, done.Add(cfg.FastFailureWindow))
		}
		if st := r.d.Stats(); st.DialsStarted != 1 || st.DialsSucceeded != 1 {
			t.Errorf("stats %+v", st)
		}
	})
}

// DialFunc's contract: the directory reports a connection before the dial
// returns. When it does not, the connection is already gone: a fast failure.
func TestDialSuccess_ConnectionAlreadyGoneIsFastFailure(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		r.d.dial = func(context.Context, string, string) error { return nil } // never marks it connected
		r.dir.add("a", "10.0.0.1:9788")
		r.start()
		s := r.mustStatus("a", StateNeedsDial)
		if s.Attempts != 1 || s.RetryDelay != cfg.MinRetryInterval || s.LastError != ErrFastFailure.Error() {
			t.Errorf("after a connection that was gone on arrival: %+v", s)
		}
		if st := r.d.Stats(); st.DialsSucceeded != 1 || st.FastFailures != 1 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestSurvival_StillConnectedResetsAndDrops(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		r.dir.add("a", "10.0.0.1:9788")
		r.start()
		advance(cfg.FastFailureWindow - time.Millisecond)
		r.mustStatus("a", StateConnected)
		advance(time.Millisecond)
		r.mustUntracked("a")
		if s := r.d.Stats(); s.Removals != 1 || s.Tracked != 0 {
			t.Errorf("stats %+v, want 1 removal and nothing tracked", s)
		}
	})
}

// The survival check runs exactly when the window ends, so a connection
// found gone then was lost at the window's end at the earliest: the
// normal rule (reset, redial at once from the first address).
func TestSurvival_GoneTakesLostRule(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		r.dir.add("a", "10.0.0.1:9788", "10.0.0.2:9788")
		n := 0
		r.setScript(func(string, string) outcome {
			switch n++; n {
			case 1:
				return outcome{err: errRefused}
			case 2:
				return outcome{}
			}
			return outcome{release: make(chan struct{})} // the redial hangs
		})
		r.start()
		advance(cfg.MinRetryInterval) // failed at .1, connected at .2
		s := r.mustStatus("a", StateConnected)
		r.dir.setConnected("a", false) // silently
		advance(time.Until(s.NextDial))

		got := r.dials("a")
		if len(got) != 3 || got[2].addr != "10.0.0.1:9788" || !got[2].at.Equal(s.NextDial) {
			t.Fatalf("dials %+v: want a third, to the first address, at the check (%v)", got, s.NextDial)
		}
		if s := r.mustStatus("a", StateDialing); s.Attempts != 0 || s.RetryDelay != 0 {
			t.Errorf("backoff not reset: %+v", s)
		}
	})
}

func TestDisconnect_InsideWindowContinuesBackoff_OutsideResetsAndRedials(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		r.dir.add("a", "10.0.0.1:9788", "10.0.0.2:9788")
		r.start()
		synctest.Wait()
		t0 := time.Now()
		r.mustStatus("a", StateConnected)

		advance(time.Second) // inside the window
		r.dir.setConnected("a", false)
		r.d.Disconnected("a")
		synctest.Wait()
		s := r.mustStatus("a", StateNeedsDial)
		if s.RetryDelay != cfg.MinRetryInterval || s.Attempts != 1 || s.AddrIndex != 1 || s.LastError != ErrFastFailure.Error() {
			t.Errorf("after a fast failure: %+v, want backoff Min, 1 attempt, rotated", s)
		}
		if st := r.d.Stats(); st.FastFailures != 1 {
			t.Errorf("fast failures %d, want 1", st.FastFailures)
		}
		advance(cfg.MinRetryInterval)
		got := r.dials("a")
		if len(got) != 2 || got[1].at != t0.Add(time.Second+cfg.MinRetryInterval) || got[1].addr != "10.0.0.2:9788" {
			t.Fatalf("dials %+v, want a second to .2 after the backoff", got)
		}

		advance(cfg.FastFailureWindow - time.Millisecond)
		r.mustStatus("a", StateConnected) // still watched
		advance(time.Minute)              // survived: untracked
		r.mustUntracked("a")

		r.dir.setConnected("a", false)
		r.d.Disconnected("a") // a long-lived connection: normal disconnect
		lost := time.Now()
		synctest.Wait()
		got = r.dials("a")
		if len(got) != 3 || got[2].at != lost || got[2].addr != "10.0.0.1:9788" {
			t.Errorf("dials %+v, want a third to .1 at once", got)
		}

		// The same, for a record still Connected but past the window.
		r.dir.setConnected("a", false)
		advance(cfg.FastFailureWindow) // the check finds it gone: normal
		got = r.dials("a")
		if len(got) != 4 {
			t.Fatalf("%d dials, want 4", len(got))
		}
	})
}

func TestDisconnect_UntrackedWithAddressesRedialsAtOnce(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788")
		r.dir.setConnected("a", true) // the scan skips it
		r.start()
		advance(5 * time.Minute)
		r.mustUntracked("a")

		r.dir.setConnected("a", false)
		r.d.Disconnected("a")
		at := time.Now()
		synctest.Wait()
		got := r.dials("a")
		if len(got) != 1 || got[0].at != at {
			t.Errorf("dials %+v, want one at once", got)
		}
	})
}

func TestDisconnect_UntrackedWithoutAddressesDoesNothing(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("noaddr")
		r.start()
		r.d.Disconnected("noaddr")
		r.d.Disconnected("unknown")
		advance(time.Minute)
		r.mustUntracked("noaddr")
		r.mustUntracked("unknown")
		if n := len(r.dials("")); n != 0 {
			t.Errorf("%d dials", n)
		}
	})
}

func TestUpdated_UntrackedEligibleDueNow(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.start()
		advance(10 * time.Second)
		r.dir.add("a", "10.0.0.1:9788")
		r.d.Updated("a")
		at := time.Now()
		synctest.Wait()
		if got := r.dials("a"); len(got) != 1 || got[0].at != at {
			t.Errorf("dials %+v, want one at once", got)
		}
	})
}

func TestUpdated_WhileConnectedIgnored(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788")
		r.start()
		synctest.Wait()
		before := r.mustStatus("a", StateConnected)
		r.dir.set("a", func(e *memEntry) { e.addrs, e.eligible = []string{"10.9.9.9:9788"}, false })
		r.d.Updated("a")
		synctest.Wait()
		if d := cmp.Diff(before, r.mustStatus("a", StateConnected)); d != "" {
			t.Errorf("an update changed a Connected record (-before +after):\n%s", d)
		}
	})
}

func TestUpdated_LosingEligibilityRemoves(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788")
		r.setScript(func(string, string) outcome { return outcome{err: errRefused} })
		r.start()
		synctest.Wait()
		r.mustStatus("a", StateNeedsDial)
		r.dir.set("a", func(e *memEntry) { e.eligible = false })
		r.d.Updated("a")
		synctest.Wait()
		r.mustUntracked("a")
		advance(time.Hour - time.Second) // up to, not including, the next scan
		if n := len(r.dials("a")); n != 1 {
			t.Errorf("%d dials, want only the first", n)
		}
	})
}

// A target that loses its addresses while its dial is in flight is
// dropped at once; the dial's late result is ignored.
func TestUpdated_LosingAddressesWhileDialingRemoves(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788")
		r.setScript(func(string, string) outcome { return outcome{latency: time.Second, ignoreCancel: true} })
		r.start()
		synctest.Wait()
		r.mustStatus("a", StateDialing)
		r.dir.set("a", func(e *memEntry) { e.addrs = nil })
		r.d.Updated("a")
		synctest.Wait()
		r.mustUntracked("a")

		advance(time.Second) // the dial returns (success) and is ignored
		r.mustUntracked("a")
		if s := r.d.Stats(); s.DialsStarted != 1 || s.DialsSucceeded != 0 || s.InFlight != 0 {
			t.Errorf("stats %+v: want 1 started, the result dropped", s)
		}
	})
}

func TestUpdated_NewAddressesReplaceListKeepSchedule(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788", "10.0.0.2:9788")
		r.setScript(func(string, string) outcome { return outcome{err: errRefused} })
		r.start()
		synctest.Wait()
		before := r.mustStatus("a", StateNeedsDial) // index 1: .2

		r.dir.set("a", func(e *memEntry) { e.addrs = []string{"10.0.0.3:9788", "10.0.0.2:9788", "10.0.0.0:9788"} })
		r.d.Updated("a")
		synctest.Wait()
		after := r.mustStatus("a", StateNeedsDial)
		want := before
		want.Addresses = []string{"10.0.0.0:9788", "10.0.0.2:9788", "10.0.0.3:9788"}
		want.AddrIndex = 1 // still .2
		if d := cmp.Diff(want, after); d != "" {
			t.Errorf("after the update (-want +got):\n%s", d)
		}
	})
}

func TestConnected_TrackedResetsBackoff_UntrackedNothing(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		r.dir.add("a", "10.0.0.1:9788")
		r.dir.add("b", "10.0.0.2:9788")
		r.dir.setConnected("b", true)
		r.setScript(func(string, string) outcome { return outcome{err: errRefused} })
		r.start()
		advance(cfg.MinRetryInterval) // two failures
		if s := r.mustStatus("a", StateNeedsDial); s.Attempts != 2 {
			t.Fatalf("attempts %d, want 2", s.Attempts)
		}

		r.dir.setConnected("a", true) // a dialled in
		r.d.Connected("a")
		r.d.Connected("b")
		at := time.Now()
		synctest.Wait()
		s := r.mustStatus("a", StateConnected)
		if s.Attempts != 0 || s.RetryDelay != 0 || !s.ConnectedAt.Equal(at) || !s.NextDial.Equal(at.Add(cfg.FastFailureWindow)) {
			t.Errorf("after an external connection: %+v", s)
		}
		r.mustUntracked("b")
		advance(cfg.FastFailureWindow)
		r.mustUntracked("a")
	})
}

func TestDeleted_RecordGoneLateResultIgnored(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788")
		r.setScript(func(string, string) outcome { return outcome{latency: time.Second, ignoreCancel: true} })
		r.start()
		synctest.Wait()
		r.mustStatus("a", StateDialing)
		r.dir.remove("a")
		r.d.Deleted("a")
		synctest.Wait()
		r.mustUntracked("a")

		advance(time.Second) // the dial returns (success) and is ignored
		r.mustUntracked("a")
		s := r.d.Stats()
		if s.DialsStarted != 1 || s.DialsSucceeded != 0 || s.Removals != 1 || s.InFlight != 0 {
			t.Errorf("stats %+v: want 1 started, the result dropped, 1 removal", s)
		}
	})
}

func TestSnapshot_ReflectsLoopState(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		// Before Run, a snapshot waits for the loop, bounded by ctx.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := r.d.Snapshot(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("snapshot before Run: %v, want the deadline", err)
		}

		r.dir.add("b", "10.0.0.2:9788")
		r.dir.add("a", "10.0.0.1:9788")
		release := make(chan struct{})
		r.setScript(func(id, _ string) outcome {
			if id == "a" {
				return outcome{err: errRefused}
			}
			return outcome{release: release}
		})
		t0 := time.Now()
		r.start()
		advance(cfg.ScanSpread) // b dials at 0 and hangs, a at +50ms and fails

		all, err := r.d.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := []TargetStatus{
			{ID: "a", State: StateNeedsDial, Addresses: []string{"10.0.0.1:9788"}, Attempts: 1,
				RetryDelay: cfg.MinRetryInterval, NextDial: t0.Add(cfg.ScanSpread + cfg.MinRetryInterval), LastError: errRefused.Error()},
			{ID: "b", State: StateDialing, Addresses: []string{"10.0.0.2:9788"}},
		}
		if d := cmp.Diff(want, all); d != "" {
			t.Errorf("snapshot (-want +got):\n%s", d)
		}
		wantStats := Stats{Tracked: 2, InFlight: 1, DialsStarted: 2, DialsFailed: 1}
		if d := cmp.Diff(wantStats, r.d.Stats()); d != "" {
			t.Errorf("stats (-want +got):\n%s", d)
		}

		r.stop() // cancels b's dial
		if _, err := r.d.Snapshot(context.Background()); !errors.Is(err, ErrStopped) {
			t.Errorf("snapshot after Run: %v, want ErrStopped", err)
		}
		if err := r.d.Run(context.Background()); !errors.Is(err, ErrStopped) {
			t.Errorf("second Run: %v, want ErrStopped", err)
		}
		r.d.Updated("a") // dropped, does not block or panic
		if s := r.d.Stats(); s.InFlight != 0 {
			t.Errorf("in flight after stop: %d", s.InFlight)
		}
	})
}

func TestLog_OneLinePerTransition(t *testing.T) {
	var buf bytes.Buffer
	g := newEngineRig(t, testConfig())
	g.e.log = zerolog.New(&buf).Level(zerolog.DebugLevel)
	g.dir.add("a", "10.0.0.1:9788")
	g.dialNow("a")               // updated, dispatched
	g.finish("a", errRefused)    // dialFailed
	g.e.disconnected(g.now, "a") // stale in NeedsDial

	var transitions []string
	stale := 0
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var entry struct {
			Message, ID, Event, From, To, State string
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch entry.Message {
		case "transition":
			if entry.ID != "a" {
				t.Errorf("transition line without the id: %s", line)
			}
			transitions = append(transitions, entry.From+" --"+entry.Event+"--> "+entry.To)
		case "stale event dropped":
			stale++
		}
	}
	want := []string{
		"None --updated--> NeedsDial",
		"NeedsDial --dispatched--> Dialing",
		"Dialing --dialFailed--> NeedsDial",
	}
	if d := cmp.Diff(want, transitions); d != "" {
		t.Errorf("transition lines (-want +got):\n%s", d)
	}
	if stale != 1 {
		t.Errorf("%d stale-event lines, want 1 (the disconnect in NeedsDial)", stale)
	}
}

func TestDial_PanicIsAFailure(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.d.dial = func(context.Context, string, string) error { panic("boom") }
		r.dir.add("a", "10.0.0.1:9788")
		r.start()
		s := r.mustStatus("a", StateNeedsDial)
		if s.Attempts != 1 || !strings.Contains(s.LastError, "boom") {
			t.Errorf("after a panicking dial: %+v", s)
		}
		if st := r.d.Stats(); st.DialsFailed != 1 || st.InFlight != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}
