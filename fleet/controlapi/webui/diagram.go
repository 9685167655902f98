package webui

import (
	"fmt"
	"html/template"
	"slices"
	"strings"

	"example.com/pifleet/internal/fsmkit"
)

// machine is what a state table offers the diagram: its name and its
// arrows, the start marker included.
type machine interface {
	Name() string
	Edges() []fsmkit.Edge
}

// Diagram geometry, in SVG user units.
const (
	nodeW, nodeH = 132, 30
	colGap       = 22
	rowGap       = 46
	margin       = 16
)

// diagramSVG renders m as an SVG drawing: states in rows by their distance
// from the start, one arrow per transition (its events in a tooltip).
// Every state is a <g class="st" data-state="NAME"> and every arrow a
// <path class="tr" data-src="SRC" data-dst="DST">, so the page highlights
// the current state and the ways out of it with classes alone: the
// drawing is made once, here, from the very table the code runs on; no
// JavaScript library lays it out.
func diagramSVG(m machine) template.HTML {
	edges := m.Edges()
	// Rank states by breadth-first distance from the start; unreachable
	// ones (none in a checked table) go last.
	adj := map[string][]string{}
	var initial string
	var order []string
	seen := map[string]bool{}
	add := func(s string) {
		if s != "[*]" && !seen[s] {
			seen[s] = true
			order = append(order, s)
		}
	}
	for _, e := range edges {
		if e.Src == "[*]" {
			initial = e.Dst
		}
		if e.Src != "[*]" && e.Dst != "[*]" {
			adj[e.Src] = append(adj[e.Src], e.Dst)
		}
		add(e.Src)
		add(e.Dst)
	}
	rank := map[string]int{initial: 0}
	queue := []string{initial}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		next := slices.Clone(adj[s])
		slices.Sort(next)
		for _, d := range next {
			if _, ok := rank[d]; !ok {
				rank[d] = rank[s] + 1
				queue = append(queue, d)
			}
		}
	}
	maxRank := 0
	for _, r := range rank {
		maxRank = max(maxRank, r)
	}
	for _, s := range order {
		if _, ok := rank[s]; !ok {
			maxRank++
			rank[s] = maxRank
		}
	}
	rows := make([][]string, maxRank+1)
	for _, s := range order {
		rows[rank[s]] = append(rows[rank[s]], s)
	}
	widest := 0
	for _, r := range rows {
		slices.Sort(r)
		widest = max(widest, len(r))
	}
	orderRows(rows, edges)
	width := 2*margin + widest*nodeW + (widest-1)*colGap
	height := 2*margin + len(rows)*nodeH + (len(rows)-1)*rowGap
	type pos struct{ x, y int }
	at := map[string]pos{}
	for ri, r := range rows {
		rowW := len(r)*nodeW + (len(r)-1)*colGap
		x0 := (width - rowW) / 2
		for ci, s := range r {
			at[s] = pos{x0 + ci*(nodeW+colGap), margin + ri*(nodeH+rowGap)}
		}
	}

	// One arrow per (source, destination), its events joined.
	type pair struct{ src, dst string }
	labels := map[pair][]string{}
	var pairs []pair
	for _, e := range edges {
		if e.Src == "[*]" || e.Dst == "[*]" {
			continue
		}
		p := pair{e.Src, e.Dst}
		if _, ok := labels[p]; !ok {
			pairs = append(pairs, p)
		}
		labels[p] = append(labels[p], e.Label)
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="fsm" viewBox="0 0 %d %d" role="img" aria-label="%s state machine">`,
		width, height, template.HTMLEscapeString(m.Name()))
	b.WriteString(`<defs><marker id="arrow-` + template.HTMLEscapeString(m.Name()) + `" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="tip"/></marker></defs>`)
	for _, p := range pairs {
		s, d := at[p.src], at[p.dst]
		var path string
		switch {
		case rank[p.dst] > rank[p.src]: // down
			x1, y1 := s.x+nodeW/2, s.y+nodeH
			x2, y2 := d.x+nodeW/2, d.y
			my := (y1 + y2) / 2
			path = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, x1, my, x2, my, x2, y2)
		case rank[p.dst] == rank[p.src]: // sideways, arcing above the row
			x1, x2 := s.x+nodeW/2, d.x+nodeW/2
			y := s.y
			path = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y, x1, y-rowGap/2-4, x2, y-rowGap/2-4, x2, y)
		default: // back up: leave and enter by the sides
			x1, y1 := s.x, s.y+nodeH/2
			x2, y2 := d.x, d.y+nodeH/2
			if d.x > s.x {
				x1, x2 = s.x+nodeW, d.x+nodeW
			}
			bend := -40
			if d.x > s.x {
				bend = 40
			}
			path = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, x1+bend, y1, x2+bend, y2, x2, y2)
		}
		class := "tr"
		if rank[p.dst] <= rank[p.src] {
			class += " back"
		}
		fmt.Fprintf(&b, `<path class="%s" data-src="%s" data-dst="%s" d="%s" marker-end="url(#arrow-%s)"><title>%s → %s: %s</title></path>`,
			class, template.HTMLEscapeString(p.src), template.HTMLEscapeString(p.dst), path, template.HTMLEscapeString(m.Name()),
			template.HTMLEscapeString(p.src), template.HTMLEscapeString(p.dst), template.HTMLEscapeString(strings.Join(labels[p], ", ")))
	}
	for _, s := range order {
		p := at[s]
		class := "st"
		if s == initial {
			class += " initial"
		}
		fmt.Fprintf(&b, `<g class="%s" data-state="%s"><rect x="%d" y="%d" width="%d" height="%d" rx="8"/><text x="%d" y="%d">%s</text></g>`,
			class, template.HTMLEscapeString(s), p.x, p.y, nodeW, nodeH, p.x+nodeW/2, p.y+nodeH/2+4, template.HTMLEscapeString(s))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built above from the table; every name escaped
}

// orderRows orders the states of each row to cross fewer arrows: a few
// sweeps of the barycenter heuristic, each state placed at the mean
// position of its neighbours in the rows above (down sweep) or below (up
// sweep). Ties keep the name order, so the drawing is stable.
func orderRows(rows [][]string, edges []fsmkit.Edge) {
	nbrs := map[string][]string{}
	for _, e := range edges {
		if e.Src != "[*]" && e.Dst != "[*]" && e.Src != e.Dst {
			nbrs[e.Src] = append(nbrs[e.Src], e.Dst)
			nbrs[e.Dst] = append(nbrs[e.Dst], e.Src)
		}
	}
	rowOf := map[string]int{}
	for ri, r := range rows {
		for _, s := range r {
			rowOf[s] = ri
		}
	}
	pos := func() map[string]float64 {
		p := map[string]float64{}
		for _, r := range rows {
			for i, s := range r {
				// Centred, so that rows of different widths line up.
				p[s] = float64(i) - float64(len(r)-1)/2
			}
		}
		return p
	}
	sweep := func(ri int, from func(int) bool) {
		p := pos()
		bary := map[string]float64{}
		for _, s := range rows[ri] {
			sum, n := 0.0, 0
			for _, o := range nbrs[s] {
				if from(rowOf[o]) {
					sum += p[o]
					n++
				}
			}
			if n > 0 {
				bary[s] = sum / float64(n)
			} else {
				bary[s] = p[s]
			}
		}
		slices.SortStableFunc(rows[ri], func(a, b string) int {
			switch {
			case bary[a] < bary[b]:
				return -1
			case bary[a] > bary[b]:
				return 1
			}
			return 0
		})
	}
	for range 4 {
		for ri := 1; ri < len(rows); ri++ {
			sweep(ri, func(r int) bool { return r < ri })
		}
		for ri := len(rows) - 2; ri >= 0; ri-- {
			sweep(ri, func(r int) bool { return r > ri })
		}
	}
}

// transitions lists each state's ways out (event → destination), for the
// page's "from here" list under the drawing.
func transitions(m machine) map[string][][2]string {
	out := map[string][][2]string{}
	for _, e := range m.Edges() {
		if e.Src == "[*]" || e.Dst == "[*]" {
			continue
		}
		out[e.Src] = append(out[e.Src], [2]string{e.Label, e.Dst})
	}
	return out
}
