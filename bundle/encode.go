package bundle

import (
	"example.com/pifleet/internal/jsjson"
)

// MarshalJSON writes the manifest as compact JSON in the key order of the
// TypeScript pi-fleet: v, the metadata keys present (platforms, extensions, skills,
// prompts, tools, model, review, budget, ui), bundleHash, files (each
// {path, sha256, bytes}). Properties of a parsed manifest that this
// package does not model are not written; Raw keeps them.
func (m *Manifest) MarshalJSON() ([]byte, error) {
	v := m.value()
	return jsjson.Append(nil, &v), nil
}

// UnmarshalJSON parses data with ParseManifest.
func (m *Manifest) UnmarshalJSON(data []byte) error {
	parsed, err := ParseManifest(data)
	if err != nil {
		return err
	}
	*m = *parsed
	return nil
}

// Encode returns the manifest as manifest.json holds it: the JSON of
// MarshalJSON indented with tabs, then a line feed. The same manifest
// gives the same bytes on every platform.
func (m *Manifest) Encode() []byte {
	v := m.value()
	return append(jsjson.AppendIndent(nil, &v, "\t"), '\n')
}

func (m *Manifest) value() jsjson.Value {
	obj := object(member("v", number(Version)), member("name", str(m.Name)))
	obj.Members = append(obj.Members, m.Metadata.members()...)
	files := jsjson.Value{Kind: jsjson.Array, Items: make([]jsjson.Value, len(m.Files))}
	for i, f := range m.Files {
		files.Items[i] = object(
			member("path", str(f.Path)),
			member("sha256", str(f.SHA256)),
			member("bytes", number(float64(f.Bytes))),
		)
	}
	obj.Members = append(obj.Members, member("bundleHash", str(m.BundleHash)), member("files", files))
	return obj
}

// members returns the metadata keys that are present, in manifest order.
func (md *Metadata) members() []jsjson.Member {
	var ms []jsjson.Member
	for _, l := range []struct {
		key  string
		list []string
	}{{"platforms", md.Platforms}, {"extensions", md.Extensions}, {"skills", md.Skills}, {"prompts", md.Prompts}} {
		if l.list != nil {
			ms = append(ms, member(l.key, strs(l.list)))
		}
	}
	if md.Tools != nil {
		t := object()
		if md.Tools.Active != nil {
			t.Members = append(t.Members, member("active", strs(md.Tools.Active)))
		}
		ms = append(ms, member("tools", t))
	}
	if md.Model != nil {
		mo := object(member("primary", modelRef(md.Model.Primary)))
		if md.Model.Fallbacks != nil {
			fb := jsjson.Value{Kind: jsjson.Array, Items: []jsjson.Value{}}
			for _, r := range md.Model.Fallbacks {
				fb.Items = append(fb.Items, modelRef(r))
			}
			mo.Members = append(mo.Members, member("fallbacks", fb))
		}
		if md.Model.Pin != nil {
			mo.Members = append(mo.Members, member("pin", boolean(*md.Model.Pin)))
		}
		ms = append(ms, member("model", mo))
	}
	if md.Review != nil {
		ms = append(ms, member("review", numbers(member2{"maxRejects", md.Review.MaxRejects})))
	}
	if md.Budget != nil {
		ms = append(ms, member("budget", numbers(
			member2{"maxCost", md.Budget.MaxCost}, member2{"maxTurns", md.Budget.MaxTurns}, member2{"maxMinutes", md.Budget.MaxMinutes})))
	}
	if md.UI != nil {
		u := object()
		if md.UI.AutoAnswer != nil {
			aa := object()
			for _, a := range md.UI.AutoAnswer {
				if a.Bool != nil {
					aa.Members = append(aa.Members, member(a.Key, boolean(*a.Bool)))
				} else {
					aa.Members = append(aa.Members, member(a.Key, str(a.Text)))
				}
			}
			u.Members = append(u.Members, member("autoAnswer", aa))
		}
		ms = append(ms, member("ui", u))
	}
	return ms
}

type member2 struct {
	key string
	n   *float64
}

func numbers(fields ...member2) jsjson.Value {
	o := object()
	for _, f := range fields {
		if f.n != nil {
			o.Members = append(o.Members, member(f.key, number(*f.n)))
		}
	}
	return o
}

func modelRef(r ModelRef) jsjson.Value {
	o := object(member("provider", str(r.Provider)), member("id", str(r.ID)))
	if r.Thinking != "" {
		o.Members = append(o.Members, member("thinking", str(r.Thinking)))
	}
	return o
}

func object(ms ...jsjson.Member) jsjson.Value {
	if ms == nil {
		ms = []jsjson.Member{}
	}
	return jsjson.Value{Kind: jsjson.Object, Members: ms}
}

func member(key string, v jsjson.Value) jsjson.Member { return jsjson.Member{Key: key, Value: v} }
func str(s string) jsjson.Value                       { return jsjson.Value{Kind: jsjson.String, Str: s} }
func number(n float64) jsjson.Value                   { return jsjson.Value{Kind: jsjson.Number, Num: n} }
func boolean(b bool) jsjson.Value                     { return jsjson.Value{Kind: jsjson.Bool, Bool: b} }

func strs(list []string) jsjson.Value {
	a := jsjson.Value{Kind: jsjson.Array, Items: make([]jsjson.Value, len(list))}
	for i, s := range list {
		a.Items[i] = str(s)
	}
	return a
}
