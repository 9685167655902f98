package fsmkit

import (
	"bufio"
	"fmt"
	"strings"
)

// MermaidBlock returns the body of the first ```mermaid fenced block that
// follows the first line of markdown containing heading. It is how tests
// read the seed diagrams copied into docs/seeds.
func MermaidBlock(markdown, heading string) (string, error) {
	lines := strings.Split(strings.ReplaceAll(markdown, "\r\n", "\n"), "\n")
	i := 0
	for ; i < len(lines); i++ {
		if strings.Contains(lines[i], heading) {
			break
		}
	}
	if i == len(lines) {
		return "", fmt.Errorf("fsmkit: heading %q not found", heading)
	}
	for ; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "```mermaid" {
			break
		}
	}
	if i == len(lines) {
		return "", fmt.Errorf("fsmkit: no mermaid block after heading %q", heading)
	}
	var body []string
	for i++; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "```" {
			return strings.Join(body, "\n") + "\n", nil
		}
		body = append(body, lines[i])
	}
	return "", fmt.Errorf("fsmkit: unterminated mermaid block after heading %q", heading)
}

// ParseMermaid reads the edges of a Mermaid stateDiagram: lines of the form
// "A --> B", "A --> B: label" or "A --> B : label". The header line,
// blank lines, %% comments and notes are skipped; any other line is an error
// naming its number, so that a diagram the parser does not understand can
// never pass a comparison by being silently ignored.
func ParseMermaid(diagram string) ([]Edge, error) {
	var edges []Edge
	sc := bufio.NewScanner(strings.NewReader(diagram))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "", strings.HasPrefix(line, "%%"),
			strings.HasPrefix(line, "stateDiagram"), strings.HasPrefix(line, "note "),
			strings.HasPrefix(line, "direction "):
			continue
		}
		src, rest, ok := strings.Cut(line, "-->")
		if !ok {
			return nil, fmt.Errorf("fsmkit: mermaid line %d: not an edge: %q", n, line)
		}
		dst, label, _ := strings.Cut(rest, ":")
		e := Edge{Src: strings.TrimSpace(src), Dst: strings.TrimSpace(dst), Label: strings.TrimSpace(label)}
		if !validStateToken(e.Src) || !validStateToken(e.Dst) {
			return nil, fmt.Errorf("fsmkit: mermaid line %d: bad state name in %q", n, line)
		}
		edges = append(edges, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("fsmkit: reading mermaid: %w", err)
	}
	return edges, nil
}

func validStateToken(s string) bool {
	if s == "[*]" {
		return true
	}
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
