package worker

import (
	"time"

	"example.com/pifleet/transport/pirpc"
)

// Budget limit names, as Settled.BudgetReason and Snapshot report them.
const (
	LimitCost    = "maxCost"
	LimitTurns   = "maxTurns"
	LimitMinutes = "maxMinutes"
)

// budgetMeter applies a Budget to a worker's events. It is a plain value
// (no clock, no goroutine): the worker runs the per-run timer from
// runLimit and reports its expiry with expire.
type budgetMeter struct {
	limit Budget
	cost  float64
	turns int
	// breached is the sticky instance-level breach (cost or turns).
	breached string
	// runBreached is this run's maxMinutes breach.
	runBreached string
}

// observe feeds one event; it returns the limit this event breached, ""
// when none (a limit is reported once).
func (b *budgetMeter) observe(ev *pirpc.Event) string {
	switch ev.Type {
	case pirpc.EventMessageEnd:
		if ev.Message == nil || ev.Message.Role != pirpc.RoleAssistant {
			return ""
		}
		b.cost += ev.Message.Cost()
		if b.limit.MaxCost > 0 && b.cost > b.limit.MaxCost && b.breached == "" {
			b.breached = LimitCost
			return LimitCost
		}
	case pirpc.EventTurnEnd:
		b.turns++
	case pirpc.EventTurnStart:
		// A turn beyond the budget begins: abort it at once.
		if b.limit.MaxTurns > 0 && b.turns >= b.limit.MaxTurns && b.breached == "" {
			b.breached = LimitTurns
			return LimitTurns
		}
	}
	return ""
}

// runLimit is how long a run may last, 0 for no limit.
func (b *budgetMeter) runLimit() time.Duration {
	return time.Duration(b.limit.MaxMinutes * float64(time.Minute))
}

// expire records that the current run outlasted MaxMinutes.
func (b *budgetMeter) expire() string {
	if b.runBreached != "" {
		return ""
	}
	b.runBreached = LimitMinutes
	return LimitMinutes
}

// exceeded is the limit a settle reports, "" when none; it ends the run's
// own breach.
func (b *budgetMeter) settle() string {
	reason := b.breached
	if reason == "" {
		reason = b.runBreached
	}
	b.runBreached = ""
	return reason
}

// overNow reports whether a new run must be aborted at once.
func (b *budgetMeter) overNow() bool { return b.breached != "" }
