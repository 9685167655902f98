package bundle_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle"
)

func TestParseMetadataNamesUnknownAndMalformedKeys(t *testing.T) {
	for _, tc := range []struct {
		text   string
		fields []string
	}{
		{`{"skils":["a"]}`, []string{"skils"}},
		{`{"name":"x"}`, []string{"name"}},
		{`{"tools":{"activ":[]}}`, []string{"tools.activ"}},
		{`{"model":{"primary":{"provider":"p","id":"i","temp":1},"fallbacks":[{"provider":"p","id":"i","thinking":"x"}]}}`,
			[]string{"model.primary.temp", "model.fallbacks[0].thinking"}},
		{`{"platforms":"linux","budget":{"maxCost":"1"},"review":[]}`, []string{"platforms", "budget.maxCost", "review"}},
		{`{"skills":["../x","ok"],"prompts":["C:/x"]}`, []string{"skills[0]", "prompts[0]"}},
		{`{"ui":{"autoAnswer":{"a":1}}}`, []string{`ui.autoAnswer["a"]`}},
		{`[]`, []string{"(bundle.json)"}},
		{`{`, []string{"(bundle.json)"}},
	} {
		_, err := bundle.ParseMetadata([]byte(tc.text))
		var me *bundle.MetadataError
		if !errors.As(err, &me) {
			t.Errorf("ParseMetadata(%s) = %v, want a MetadataError", tc.text, err)
			continue
		}
		var fields []string
		for _, p := range me.Problems {
			fields = append(fields, p.Field)
		}
		if d := cmp.Diff(tc.fields, fields); d != "" {
			t.Errorf("ParseMetadata(%s): fields (-want +got):\n%s\n%v", tc.text, d, err)
		}
		for _, f := range tc.fields {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("message %q does not name %s", err, f)
			}
		}
	}
}

func TestParseMetadataKeepsDocumentOrder(t *testing.T) {
	md, err := bundle.ParseMetadata([]byte(`{"ui":{"autoAnswer":{"b":"1","a":false,"2":"x"}},"skills":["s"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, a := range md.UI.AutoAnswer {
		keys = append(keys, a.Key)
	}
	// JavaScript puts array-index keys first.
	if d := cmp.Diff([]string{"2", "b", "a"}, keys); d != "" {
		t.Errorf("autoAnswer keys (-want +got):\n%s", d)
	}
}

func TestReadMetadataWithoutFile(t *testing.T) {
	md, err := bundle.ReadMetadata(t.TempDir())
	if err != nil || md.Skills != nil || md.Tools != nil {
		t.Errorf("ReadMetadata of a directory without bundle.json = %+v, %v", md, err)
	}
	dir := writeTree(t, map[string]string{"bundle.json": `{"bogus":1}`})
	_, err = bundle.ReadMetadata(dir)
	if err == nil || !strings.Contains(err.Error(), "bundle.json") || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("ReadMetadata = %v, want an error naming the file and the key", err)
	}
}
