package bundle

import (
	"math"
	"strconv"

	"example.com/pifleet/internal/jsjson"
)

// schema walks a parsed JSON document and collects every problem, naming
// each field as JavaScript code would reach it.
type schema struct {
	problems []FieldError
	// strict refuses keys the schema does not know (bundle.json); a
	// manifest allows them (reference 1.20).
	strict bool
}

func (s *schema) fail(field, reason string) {
	s.problems = append(s.problems, FieldError{Field: field, Reason: reason})
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func index(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// object checks that v is an object and, in strict mode, that it has no
// key outside known.
func (s *schema) object(field string, v *jsjson.Value, known ...string) bool {
	if v.Kind != jsjson.Object {
		s.fail(field, "must be an object, not "+v.Kind.String())
		return false
	}
	if s.strict {
		for _, m := range v.Members {
			if !contains(known, m.Key) {
				s.fail(join(field, m.Key), "unknown key")
			}
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (s *schema) str(field string, v *jsjson.Value) (string, bool) {
	if v.Kind != jsjson.String {
		s.fail(field, "must be a string, not "+v.Kind.String())
		return "", false
	}
	return v.Str, true
}

func (s *schema) number(field string, v *jsjson.Value) (*float64, bool) {
	if v.Kind != jsjson.Number {
		s.fail(field, "must be a number, not "+v.Kind.String())
		return nil, false
	}
	if math.IsInf(v.Num, 0) {
		s.fail(field, "must be a finite number")
		return nil, false
	}
	n := v.Num
	return &n, true
}

func (s *schema) boolean(field string, v *jsjson.Value) (*bool, bool) {
	if v.Kind != jsjson.Bool {
		s.fail(field, "must be a boolean, not "+v.Kind.String())
		return nil, false
	}
	b := v.Bool
	return &b, true
}

func (s *schema) strings(field string, v *jsjson.Value) []string {
	if v.Kind != jsjson.Array {
		s.fail(field, "must be an array of strings, not "+v.Kind.String())
		return nil
	}
	out := make([]string, 0, len(v.Items))
	for i := range v.Items {
		if str, ok := s.str(index(field, i), &v.Items[i]); ok {
			out = append(out, str)
		}
	}
	return out
}

// metadata reads the metadata keys of obj (a manifest or a bundle.json).
func (s *schema) metadata(obj *jsjson.Value) Metadata {
	var md Metadata
	for i := range obj.Members {
		m := &obj.Members[i]
		v := &m.Value
		switch m.Key {
		case "platforms":
			md.Platforms = s.strings(m.Key, v)
		case "extensions":
			md.Extensions = s.strings(m.Key, v)
		case "skills":
			md.Skills = s.strings(m.Key, v)
		case "prompts":
			md.Prompts = s.strings(m.Key, v)
		case "tools":
			md.Tools = s.tools(v)
		case "model":
			md.Model = s.model(v)
		case "review":
			if s.object("review", v, "maxRejects") {
				md.Review = &Review{}
				if n, ok := v.Get("maxRejects"); ok {
					md.Review.MaxRejects, _ = s.number("review.maxRejects", n)
				}
			}
		case "budget":
			md.Budget = s.budget(v)
		case "ui":
			md.UI = s.ui(v)
		}
	}
	return md
}

func (s *schema) tools(v *jsjson.Value) *Tools {
	if !s.object("tools", v, "active") {
		return nil
	}
	t := &Tools{}
	if a, ok := v.Get("active"); ok {
		t.Active = s.strings("tools.active", a)
	}
	return t
}

func (s *schema) model(v *jsjson.Value) *ModelPolicy {
	if !s.object("model", v, "primary", "fallbacks", "pin") {
		return nil
	}
	p := &ModelPolicy{}
	if primary, ok := v.Get("primary"); ok {
		p.Primary = s.modelRef("model.primary", primary, true)
	} else {
		s.fail("model.primary", "is required")
	}
	if fb, ok := v.Get("fallbacks"); ok {
		if fb.Kind != jsjson.Array {
			s.fail("model.fallbacks", "must be an array, not "+fb.Kind.String())
		} else {
			p.Fallbacks = make([]ModelRef, 0, len(fb.Items))
			for i := range fb.Items {
				p.Fallbacks = append(p.Fallbacks, s.modelRef(index("model.fallbacks", i), &fb.Items[i], false))
			}
		}
	}
	if pin, ok := v.Get("pin"); ok {
		p.Pin, _ = s.boolean("model.pin", pin)
	}
	return p
}

// modelRef reads {provider, id, thinking?}. The schema gives fallbacks no
// thinking field; a manifest may still carry one (unknown keys are
// allowed), and it is kept.
func (s *schema) modelRef(field string, v *jsjson.Value, withThinking bool) ModelRef {
	known := []string{"provider", "id"}
	if withThinking {
		known = append(known, "thinking")
	}
	var r ModelRef
	if !s.object(field, v, known...) {
		return r
	}
	for _, key := range []string{"provider", "id"} {
		x, ok := v.Get(key)
		if !ok {
			s.fail(join(field, key), "is required")
			continue
		}
		if str, ok := s.str(join(field, key), x); ok {
			if key == "provider" {
				r.Provider = str
			} else {
				r.ID = str
			}
		}
	}
	if t, ok := v.Get("thinking"); ok && (withThinking || !s.strict) {
		r.Thinking, _ = s.str(join(field, "thinking"), t)
	}
	return r
}

func (s *schema) budget(v *jsjson.Value) *Budget {
	if !s.object("budget", v, "maxCost", "maxTurns", "maxMinutes") {
		return nil
	}
	b := &Budget{}
	for _, f := range []struct {
		key string
		dst **float64
	}{{"maxCost", &b.MaxCost}, {"maxTurns", &b.MaxTurns}, {"maxMinutes", &b.MaxMinutes}} {
		if n, ok := v.Get(f.key); ok {
			*f.dst, _ = s.number("budget."+f.key, n)
		}
	}
	return b
}

func (s *schema) ui(v *jsjson.Value) *UI {
	if !s.object("ui", v, "autoAnswer") {
		return nil
	}
	u := &UI{}
	aa, ok := v.Get("autoAnswer")
	if !ok {
		return u
	}
	if aa.Kind != jsjson.Object {
		s.fail("ui.autoAnswer", "must be an object, not "+aa.Kind.String())
		return u
	}
	u.AutoAnswer = make([]AutoAnswer, 0, len(aa.Members))
	for _, m := range aa.Members {
		field := "ui.autoAnswer[" + strconv.Quote(m.Key) + "]"
		switch m.Value.Kind {
		case jsjson.String:
			u.AutoAnswer = append(u.AutoAnswer, AutoAnswer{Key: m.Key, Text: m.Value.Str})
		case jsjson.Bool:
			b := m.Value.Bool
			u.AutoAnswer = append(u.AutoAnswer, AutoAnswer{Key: m.Key, Bool: &b})
		default:
			s.fail(field, "must be a string or a boolean, not "+m.Value.Kind.String())
		}
	}
	return u
}
