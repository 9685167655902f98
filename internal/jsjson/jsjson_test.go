package jsjson_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/internal/jsjson"
)

func roundTrip(t *testing.T, in string) string {
	t.Helper()
	v, err := jsjson.Parse([]byte(in))
	if err != nil {
		t.Fatalf("Parse(%q): %v", in, err)
	}
	return string(jsjson.Append(nil, &v))
}

// Each expectation is what JSON.stringify(JSON.parse(in)) gives in Node.
func TestRoundTripMatchesJavaScript(t *testing.T) {
	for in, want := range map[string]string{
		`{"b":1,"a":2}`:                                                  `{"b":1,"a":2}`,
		`{"a":1,"b":2,"a":3}`:                                            `{"a":3,"b":2}`,
		`{"b":1,"2":2,"a":3,"1":4,"01":5}`:                               `{"1":4,"2":2,"b":1,"a":3,"01":5}`,
		`{"4294967294":1,"4294967295":2,"x":3}`:                          `{"4294967294":1,"4294967295":2,"x":3}`,
		`{"4294967295":2,"4294967294":1}`:                                `{"4294967294":1,"4294967295":2}`,
		`[1.0, 1e2, -0, 0.1, 1e21, 1e-7, 123456789012345678901, 1.5e-6]`: `[1,100,0,0.1,1e+21,1e-7,123456789012345680000,0.0000015]`,
		`[1e400, -1e400]`:                                                `[null,null]`,
		`"<&>\u2028\u2029\/"`:                                            "\"<&>\u2028\u2029/\"",
		`"\u0000\u001f\u007f\b\f\n\r\t\"\\"`:                             `"\u0000\u001f` + "\x7f" + `\b\f\n\r\t\"\\"`,
		`"\ud83d\ude00 \uD83D"`:                                          "\"😀 \uFFFD\"",
		`"\udc00\ud800x"`:                                                "\"\uFFFD\uFFFDx\"",
		` [ true , false , null , {} , [] ] `:                            `[true,false,null,{},[]]`,
		"\"caf\xe9\"":                                                    "\"caf\uFFFD\"",
	} {
		if got := roundTrip(t, in); got != want {
			t.Errorf("round trip of %s = %s, want %s", in, got, want)
		}
	}
}

func TestIndentMatchesJavaScript(t *testing.T) {
	v, err := jsjson.Parse([]byte(`{"v":1,"tools":{"active":["read","grep"]},"empty":[],"obj":{},"files":[{"path":"a","bytes":2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n\t\"v\": 1,\n\t\"tools\": {\n\t\t\"active\": [\n\t\t\t\"read\",\n\t\t\t\"grep\"\n\t\t]\n\t},\n\t\"empty\": [],\n\t\"obj\": {},\n\t\"files\": [\n\t\t{\n\t\t\t\"path\": \"a\",\n\t\t\t\"bytes\": 2\n\t\t}\n\t]\n}"
	if got := string(jsjson.AppendIndent(nil, &v, "\t")); got != want {
		t.Errorf("indented:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseRejectsInvalidJSON(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{`, `[1,]`, `{"a":1,}`, `{a:1}`, `'x'`, `01`, `1.`, `.5`, `1e`, `+1`, `-`, `NaN`, `Infinity`,
		`"abc`, "\"a\nb\"", `"\x"`, `"\u12"`, `tru`, `nul`, `[1 2]`, `{"a" 1}`, `{"a":1 "b":2}`, `1 2`, "\xef\xbb\xbf{}",
		strings.Repeat("[", jsjson.MaxDepth+1) + strings.Repeat("]", jsjson.MaxDepth+1),
	} {
		_, err := jsjson.Parse([]byte(in))
		var se *jsjson.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a *SyntaxError", in, err)
		}
	}
	deep := strings.Repeat("[", jsjson.MaxDepth) + strings.Repeat("]", jsjson.MaxDepth)
	if _, err := jsjson.Parse([]byte(deep)); err != nil {
		t.Errorf("nesting of exactly MaxDepth refused: %v", err)
	}
}

func TestGet(t *testing.T) {
	v, err := jsjson.Parse([]byte(`{"path":"a","Path":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := v.Get("path")
	if !ok || got.Str != "a" {
		t.Errorf("Get(path) = %+v, %v", got, ok)
	}
	if _, ok := v.Get("PATH"); ok {
		t.Error("Get matched a key case-insensitively")
	}
}

func TestLargeObjectWithDuplicates(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + string(rune('a'+i%20)) + `":` + string(rune('0'+i%10)))
	}
	b.WriteString("}")
	v, err := jsjson.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range v.Members {
		keys = append(keys, m.Key)
	}
	want := []string{"ka", "kb", "kc", "kd", "ke", "kf", "kg", "kh", "ki", "kj", "kk", "kl", "km", "kn", "ko", "kp", "kq", "kr", "ks", "kt"}
	if d := cmp.Diff(want, keys); d != "" {
		t.Errorf("keys (-want +got):\n%s", d)
	}
	if kt, _ := v.Get("kt"); kt.Num != 9 {
		t.Errorf("kt = %v, want the last value 9", kt.Num)
	}
}
