package jsjson_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/internal/jsjson"
	"example.com/pifleet/internal/jsonscan/jsontest"
)

// FuzzJSON compares Parse with encoding/json, the reference for what is
// valid JSON and what it means (up to key order, which encoding/json does
// not keep), and checks that Append writes text that parses back to the
// same value. It shares its corpus with the scanner's other front ends
// (see jsontest).
func FuzzJSON(f *testing.F) {
	jsontest.Seed(f)
	for _, s := range []string{`"\ud83d\ude00\u2028"`, `"\x00"`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, canonical, err := jsjson.ParseCanonical(data)
		if valid := json.Valid(data); (err == nil) != valid {
			if err != nil && valid && jsontest.Depth(data) > jsjson.MaxDepth {
				return // deeper than we accept on purpose
			}
			t.Fatalf("Parse error %v, but json.Valid = %v for %q", err, valid, data)
		}
		if err != nil {
			return
		}
		out := jsjson.Append(nil, &v)
		if canonical && string(out) != string(data) {
			t.Fatalf("%q reported canonical, but Append writes %q", data, out)
		}
		again, err := jsjson.Parse(out)
		if err != nil {
			t.Fatalf("Append wrote invalid JSON %q for %q: %v", out, data, err)
		}
		if !finite(v) {
			return // ±Inf is written as null, as JSON.stringify does
		}
		if d := cmp.Diff(v, again); d != "" {
			t.Fatalf("round trip changed the value of %q (-first +second):\n%s", data, d)
		}
		var want any
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("encoding/json cannot read %q: %v", data, err)
		}
		if d := cmp.Diff(want, toAny(v)); d != "" {
			t.Fatalf("Parse and encoding/json disagree on %q (-json +jsjson):\n%s", data, d)
		}
	})
}

func finite(v jsjson.Value) bool {
	switch v.Kind {
	case jsjson.Number:
		return !math.IsInf(v.Num, 0)
	case jsjson.Array:
		for _, it := range v.Items {
			if !finite(it) {
				return false
			}
		}
	case jsjson.Object:
		for _, m := range v.Members {
			if !finite(m.Value) {
				return false
			}
		}
	}
	return true
}

func toAny(v jsjson.Value) any {
	switch v.Kind {
	case jsjson.Bool:
		return v.Bool
	case jsjson.Number:
		return v.Num
	case jsjson.String:
		return v.Str
	case jsjson.Array:
		out := make([]any, len(v.Items))
		for i, it := range v.Items {
			out[i] = toAny(it)
		}
		return out
	case jsjson.Object:
		out := make(map[string]any, len(v.Members))
		for _, m := range v.Members {
			out[m.Key] = toAny(m.Value)
		}
		return out
	}
	return nil
}
