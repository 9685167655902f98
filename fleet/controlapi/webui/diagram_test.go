package webui

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// TestDiagramsDrawEveryStateAndTransition parses the drawings as XML and
// checks them against the tables: one box per state, one arrow per
// (source, destination) with every event of it in the tooltip.
func TestDiagramsDrawEveryStateAndTransition(t *testing.T) {
	for _, m := range []machine{fleet.InstanceTable, transport.ConnectionTable} {
		t.Run(m.Name(), func(t *testing.T) {
			svg := string(diagramSVG(m))
			states := map[string]bool{}
			arrows := map[string]string{}
			d := xml.NewDecoder(strings.NewReader(svg))
			var inPath string
			for {
				tok, err := d.Token()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("not XML: %v\n%s", err, svg)
				}
				switch el := tok.(type) {
				case xml.StartElement:
					attr := map[string]string{}
					for _, a := range el.Attr {
						attr[a.Name.Local] = a.Value
					}
					switch {
					case el.Name.Local == "g" && attr["class"] != "":
						states[attr["data-state"]] = true
					case el.Name.Local == "path" && strings.HasPrefix(attr["class"], "tr"):
						inPath = attr["data-src"] + ">" + attr["data-dst"]
						arrows[inPath] = ""
					}
				case xml.CharData:
					if inPath != "" {
						arrows[inPath] += string(el)
					}
				case xml.EndElement:
					if el.Name.Local == "path" {
						inPath = ""
					}
				}
			}
			for _, e := range m.Edges() {
				for _, s := range []string{e.Src, e.Dst} {
					if s != "[*]" && !states[s] {
						t.Errorf("state %s not drawn", s)
					}
				}
				if e.Src == "[*]" || e.Dst == "[*]" {
					continue
				}
				title, ok := arrows[e.Src+">"+e.Dst]
				if !ok || !strings.Contains(title, e.Label) {
					t.Errorf("transition %s --%s--> %s not drawn (tooltip %q)", e.Src, e.Label, e.Dst, title)
				}
			}
			if tr := transitions(m); len(tr[string(fleet.StateRunning)]) == 0 && m.Name() == fleet.InstanceTable.Name() {
				t.Errorf("no ways out of running: %v", tr)
			}
		})
	}
}
