package worker

import (
	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/transport/pirpc"
)

// lineParser parses a worker's stdout lines as pirpc.ParseRecord does.
// pi's usual message_update, one more chunk of text, is the update before
// it byte for byte with a new delta in the step and at the end of the
// string it grows, in both copies of the partial message: the parser
// tells such a line by comparing it with the last one (streamdelta.Growth,
// the check the agent's encoder makes of the same lines) and takes the
// last record with the new delta, where a parse would scan a whole
// partial message, which grows with the answer, at every chunk.
//
// The line is untrusted: Growth.Next accepts only a delta that is a valid
// JSON string body, so that the line is valid JSON as the last one was,
// with the same members but for three strings' values (Growth.Next says
// why); GrowthOf refuses a step that could be read as naming its delta
// twice. Any other line is parsed.
type lineParser struct {
	last pirpc.Record       // the last line's record, when it was a message_update
	grow streamdelta.Growth // where last's line grows, when growing
	// finder tries whether a line starts a growth.
	finder streamdelta.GrowthFinder
	// growing says grow follows last's line.
	growing bool
	// A line that does not start a growth makes the next tries wait
	// twice as many lines (wait of them), for as long as they fail in one
	// content block: a tool call's updates, whose partial message changes
	// otherwise, cost a few tries of GrowthOf (two parses) instead of one
	// per line.
	wait, backoff int
}

// parse returns the record of line, as pirpc.ParseRecord does.
func (p *lineParser) parse(line []byte) (pirpc.Record, error) {
	if p.growing {
		if delta, ok := p.grow.Next(line); ok {
			next := p.grow.Grown(line, delta)
			if rec, ok := p.last.WithDelta(line, next.Delta()); ok {
				p.last, p.grow = rec, next
				return rec, nil
			}
		}
	}
	rec, err := pirpc.ParseRecord(line)
	p.follow(rec, err)
	return rec, err
}

// follow makes rec, the record parse gave for its line, the last one, and
// tries whether the next line may grow it.
func (p *lineParser) follow(rec pirpc.Record, err error) {
	prev := p.last
	p.last, p.growing = pirpc.Record{}, false
	if err != nil || rec.Event == nil || rec.Event.Type != pirpc.EventMessageUpdate || rec.Event.Update == nil || rec.Event.DecodeErr != nil {
		p.wait, p.backoff = 0, 0
		return
	}
	p.last = rec
	if prev.Raw == nil || prev.Event.Update.ContentIndex != rec.Event.Update.ContentIndex {
		p.wait, p.backoff = 0, 0 // another block: try at once
	}
	if prev.Raw == nil {
		return
	}
	if p.wait > 0 {
		p.wait--
		return
	}
	if p.grow, p.growing = p.finder.Of(prev.Raw, rec.Raw); p.growing {
		p.backoff = 0
		return
	}
	p.backoff = max(1, 2*p.backoff)
	p.wait = p.backoff
}
