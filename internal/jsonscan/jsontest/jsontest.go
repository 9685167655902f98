// Package jsontest holds the differential fuzz corpus that every JSON
// reader of the project is checked against encoding/json with. Each of
// them (internal/jsonscan, internal/jsjson, transport, transport/pirpc)
// has a fuzz target named FuzzJSON seeded by Seed, so a case found for one
// is tried on all: the corpus files live in one place,
// internal/jsonscan/testdata/fuzz/FuzzJSON. Copy a failing input that
// `go test -fuzz FuzzJSON` writes into a package's own testdata there.
package jsontest

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Cases are values and near-values that exercise every branch of the
// scanner and of its front ends.
var Cases = []string{
	`{}`, `[]`, `{ }`, `[ ]`, ` {"a" : [ 1 , 2 ] } `, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`,
	`{"a"}`, `{"a":}`, `{1:2}`, `{"a":1 "b":2}`, `[1 2]`, `{"a":1]`, `[1}`, `]`, `}`, `[`, `{`,
	`"plain"`, `"twelve bytes"`, `"a\"b\\c\/d\be\ff\ng\rh\ti"`, `"\u00e9\uD83D\uDE00\ud800"`,
	`"\u12"`, `"\u12G4"`, `"\x"`, `"\'"`, "\"tab\there\"", "\"nl\nhere\"", "\"\x1f\"", "\"\x7f\"",
	"\"\xff\xfe invalid utf-8\"", "\"\xe2\x80\xa8 U+2028\"", `"unterminated`, `"ends in backslash\`,
	`0`, `-0`, `1.5e+10`, `-1E-2`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `0x10`, `1.5e3.2`, `123456789012345678901234567890`,
	`1e400`, `-1e400`, `1e-400`, `[1,2.5e3,-0,true,false,null]`,
	`true`, `false`, `null`, `tru`, `nul`, `True`, `nulll`, `truefalse`,
	`[[[[[]]]]]`, `[[[[[]]]]`, `{"a":{"b":{"c":[{"d":null}]}}}`, `{"a":{"b":{"c":[{"d":null}]}}`,
	`{"a":1,"a":2,"1":0}`, `{"b":1,"2":2,"a":3,"1":4,"01":5}`, `{"ty\u0070e":"x"}`, `{"Type":"a","type":"b"}`,
	`{"v":1,"files":[{"path":"a","sha256":"00","bytes":1}]}`,
	`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,` +
		`"delta":"Refactor the handler so that it returns early when the context is done."},` +
		`"message":{"role":"assistant","api":"anthropic-messages","timestamp":1730000000123}}`,
	`{"v":1,"type":"event","instanceId":"i","event":[[[{"a":[1,-2.5e-3,true,null,"\ud800"]}]]]}`,
	`{"v":1,"type":"spawn","cwd":"/","bundle":"b","env":{"a":"1","a":"2"}}`,
	"{\"v\":1,\"type\":\"error\",\"code\":\"c\",\"message\":\"\xff\u2028\"}",
	"\t\r\n [\t1\r,\n2 ] \n", "[1\v]", "[1\f]", "\u00a0[]", "\xef\xbb\xbf{}", "", " ",
}

// Seed adds Cases and the shared corpus files to f.
func Seed(f *testing.F) {
	f.Helper()
	for _, c := range Cases {
		f.Add([]byte(c))
	}
	for _, in := range Corpus(f) {
		f.Add(in)
	}
}

// Corpus returns the inputs of the shared corpus files.
func Corpus(tb testing.TB) [][]byte {
	tb.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("jsontest: cannot locate the shared corpus")
	}
	dir := filepath.Join(filepath.Dir(self), "..", "testdata", "fuzz", "FuzzJSON")
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatalf("jsontest: %v", err)
	}
	var out [][]byte
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatalf("jsontest: %v", err)
		}
		in, err := parseCorpusFile(string(raw))
		if err != nil {
			tb.Fatalf("jsontest: corpus file %s: %v", e.Name(), err)
		}
		out = append(out, in)
	}
	return out
}

// parseCorpusFile reads a one-argument corpus file in the format
// `go test -fuzz` writes: a "go test fuzz v1" line, then []byte("...").
func parseCorpusFile(s string) ([]byte, error) {
	header, body, _ := strings.Cut(s, "\n")
	if header != "go test fuzz v1" {
		return nil, strconv.ErrSyntax
	}
	body = strings.TrimSpace(body)
	lit, ok := strings.CutPrefix(body, "[]byte(")
	if !ok {
		return nil, strconv.ErrSyntax
	}
	if lit, ok = strings.CutSuffix(lit, ")"); !ok {
		return nil, strconv.ErrSyntax
	}
	v, err := strconv.Unquote(lit)
	return []byte(v), err
}

// Depth is the nesting of arrays and objects in b, counted outside
// strings (for b that is valid JSON, its depth).
func Depth(b []byte) int {
	d, most := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == '[' || c == '{'):
			d++
			most = max(most, d)
		case !inString && (c == ']' || c == '}'):
			d--
		}
	}
	return most
}
