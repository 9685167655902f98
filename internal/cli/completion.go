package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/alecthomas/kong"
)

// CompletionCmd is the `completion` command of both binaries: it prints a
// script that completes the binary's commands, subcommands and flags.
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"bash, zsh or fish."`
}

// Help says where the script goes.
func (c *CompletionCmd) Help() string {
	return `Load it in the current shell, or from your shell's startup file:

  bash:  source <(NAME completion bash)
  zsh:   source <(NAME completion zsh)
  fish:  NAME completion fish | source`
}

// Run prints the script.
func (c *CompletionCmd) Run(k *kong.Context, out *Output) error {
	nodes := walk(k.Model.Node, nil)
	switch c.Shell {
	case "fish":
		return writeFish(out.Out, k.Model.Name, nodes)
	case "zsh":
		fmt.Fprintln(out.Out, "autoload -U +X bashcompinit && bashcompinit")
	}
	return writeBash(out.Out, k.Model.Name, nodes)
}

// node is one command of the grammar: its path of names, its
// subcommands, and its flags (its own and those it inherits).
type node struct {
	path     []string
	help     string
	children []string
	flags    []*kong.Flag
}

func walk(n *kong.Node, path []string) []node {
	me := node{path: path, help: n.Help}
	for _, f := range n.AllFlags(true) {
		for _, fl := range f {
			if !fl.Hidden {
				me.flags = append(me.flags, fl)
			}
		}
	}
	var out []node
	for _, c := range n.Children {
		if c.Hidden || c.Type != kong.CommandNode {
			continue
		}
		me.children = append(me.children, c.Name)
		out = append(out, walk(c, append(append([]string(nil), path...), c.Name))...)
	}
	sort.Strings(me.children)
	return append([]node{me}, out...)
}

func key(path []string) string { return "_" + strings.ReplaceAll(strings.Join(path, "_"), "-", "_") }

func writeBash(w io.Writer, name string, nodes []node) error {
	fn := "_" + strings.ReplaceAll(name, "-", "_") + "_complete"
	var b strings.Builder
	fmt.Fprintf(&b, "# %s completion (bash; zsh through bashcompinit)\n", name)
	fmt.Fprintf(&b, "%s() {\n\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" node=%s w i\n", fn, key(nil))
	b.WriteString("\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tw=\"${COMP_WORDS[i]}\"\n\t\tcase \"$node $w\" in\n")
	for _, n := range nodes {
		for _, c := range n.children {
			fmt.Fprintf(&b, "\t\t\"%s %s\") node=%s ;;\n", key(n.path), c, key(append(append([]string(nil), n.path...), c)))
		}
	}
	b.WriteString("\t\tesac\n\tdone\n\tlocal words\n\tcase \"$node\" in\n")
	for _, n := range nodes {
		words := append([]string(nil), n.children...)
		for _, f := range n.flags {
			words = append(words, "--"+f.Name)
		}
		fmt.Fprintf(&b, "\t%s) words=%q ;;\n", key(n.path), strings.Join(words, " "))
	}
	b.WriteString("\tesac\n\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\n")
	fmt.Fprintf(&b, "complete -o default -F %s %s\n", fn, name)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFish(w io.Writer, name string, nodes []node) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s completion (fish)\ncomplete -c %s -f\n", name, name)
	for _, n := range nodes {
		cond := "__fish_use_subcommand"
		if len(n.path) > 0 {
			cond = "__fish_seen_subcommand_from " + n.path[len(n.path)-1]
		}
		for _, c := range n.children {
			fmt.Fprintf(&b, "complete -c %s -n '%s' -a %s\n", name, cond, c)
		}
		for _, f := range n.flags {
			help := strings.ReplaceAll(strings.SplitN(f.Help, "\n", 2)[0], "'", "\\'")
			fmt.Fprintf(&b, "complete -c %s -n '%s' -l %s -d '%s'\n", name, cond, f.Name, help)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
