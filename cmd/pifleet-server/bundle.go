package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
)

// BundleCmd groups the bundle commands. They work on a registry directory
// (<root>/<name>/manifest.json and <root>/<name>/files/…), which `serve`
// and the TypeScript server can publish over HTTP.
type BundleCmd struct {
	Registry string `help:"Registry root directory." default:"${default_registry}" type:"path" env:"PIFLEET_REGISTRY"`

	Publish BundlePublishCmd `cmd:"" help:"Publish a source directory as a bundle; prints its bundleHash."`
	List    BundleListCmd    `cmd:"" help:"List the bundles of the registry."`
	Show    BundleShowCmd    `cmd:"" help:"Show one bundle's manifest."`
}

// BundlePublishCmd is `bundle publish`.
type BundlePublishCmd struct {
	Name       string `help:"Bundle name (letters, digits, '.', '_', '-')." required:"" env:"PIFLEET_BUNDLE_NAME"`
	Quiet      bool   `help:"Print only the bundleHash." short:"q" env:"PIFLEET_QUIET"`
	JSON       bool   `help:"Print the published manifest as JSON." env:"PIFLEET_JSON"`
	AllowEmpty bool   `help:"Publish a directory without bundle.json (a bundle with no metadata: no model, skills or extensions)." env:"PIFLEET_ALLOW_EMPTY"`
	Src        string `arg:"" help:"Source directory; its bundle.json holds the metadata." type:"existingdir"`
}

// Run publishes the bundle.
func (c *BundlePublishCmd) Run(parent *BundleCmd, log zerolog.Logger, out *Output) error {
	if _, err := os.Stat(filepath.Join(c.Src, bundle.MetadataFile)); errors.Is(err, fs.ErrNotExist) && !c.AllowEmpty {
		// Most likely the wrong directory: publishing it would make a
		// bundle that configures nothing.
		return fmt.Errorf("%s has no %s (the bundle's metadata): is it the right directory? Pass --allow-empty to publish it without one", c.Src, bundle.MetadataFile)
	}
	m, err := registry.Publish(parent.Registry, c.Name, c.Src, registry.PublishOptions{})
	if err != nil {
		return err
	}
	log.Info().Str("bundle", m.Name).Str("bundleHash", m.BundleHash).Int("files", len(m.Files)).Str("registry", parent.Registry).Msg("bundle published")
	if c.JSON {
		_, err := out.Out.Write(m.Encode())
		return err
	}
	if c.Quiet {
		_, err = fmt.Fprintln(out.Out, m.BundleHash)
		return err
	}
	_, err = fmt.Fprintf(out.Out, "published bundle %s: %d files, %d bytes, in %s\nbundleHash %s\n",
		m.Name, len(m.Files), m.TotalBytes(), parent.Registry, m.BundleHash)
	return err
}

// BundleListCmd is `bundle list`.
type BundleListCmd struct {
	JSON bool `help:"Print a JSON array." env:"PIFLEET_JSON"`
}

// listEntry is one bundle of `bundle list --json`.
type listEntry struct {
	registry.Entry
	Error string `json:"error,omitempty"`
}

// Run lists the bundles.
func (c *BundleListCmd) Run(parent *BundleCmd, out *Output) error {
	entries, err := registry.List(parent.Registry)
	if err != nil {
		return err
	}
	if c.JSON {
		list := make([]listEntry, 0, len(entries))
		for _, e := range entries {
			le := listEntry{Entry: e}
			if e.Err != nil {
				le.Error = e.Err.Error()
			}
			list = append(list, le)
		}
		enc := json.NewEncoder(out.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	if len(entries) == 0 {
		_, err := fmt.Fprintf(out.Out, "no bundles in %s\n", parent.Registry)
		return err
	}
	tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tBUNDLEHASH\tFILES\tBYTES")
	for _, e := range entries {
		if e.Err != nil {
			fmt.Fprintf(tw, "%s\tinvalid: %v\t\t\n", e.Name, e.Err)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", e.Name, e.BundleHash, e.Files, e.Bytes)
	}
	return tw.Flush()
}

// BundleShowCmd is `bundle show`.
type BundleShowCmd struct {
	JSON bool   `help:"Print the manifest as manifest.json holds it." env:"PIFLEET_JSON"`
	Name string `arg:"" help:"Bundle name."`
}

// Run shows the manifest.
func (c *BundleShowCmd) Run(parent *BundleCmd, out *Output) error {
	m, err := registry.Show(parent.Registry, c.Name)
	if err != nil {
		return err
	}
	if c.JSON {
		_, err := out.Out.Write(m.Encode())
		return err
	}
	tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
	writeManifest(tw, m)
	fmt.Fprintf(tw, "files\t%d (%d bytes)\n", len(m.Files), m.TotalBytes())
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
	for _, f := range m.Files {
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", f.Path, f.Bytes, f.SHA256)
	}
	return tw.Flush()
}

// writeManifest prints every field of a manifest but the file list, one
// per line; absent fields say so, so that nothing looks configured that
// is not.
func writeManifest(w io.Writer, m *bundle.Manifest) {
	list := func(key string, l []string, absent string) {
		if len(l) == 0 {
			fmt.Fprintf(w, "%s\t%s\n", key, absent)
			return
		}
		fmt.Fprintf(w, "%s\t%s\n", key, strings.Join(l, ", "))
	}
	num := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatFloat(*p, 'f', -1, 64)
	}
	model := func(r bundle.ModelRef) string {
		s := r.Provider + "/" + r.ID
		if r.Thinking != "" {
			s += ":" + r.Thinking
		}
		return s
	}
	fmt.Fprintf(w, "name\t%s\n", m.Name)
	fmt.Fprintf(w, "bundleHash\t%s\n", m.BundleHash)
	list("platforms", m.Platforms, "all")
	list("extensions", m.Extensions, "none")
	list("skills", m.Skills, "none")
	list("prompts", m.Prompts, "none")
	if m.Tools != nil {
		list("tools.active", m.Tools.Active, "none")
	} else {
		fmt.Fprintf(w, "tools.active\tpi's defaults\n")
	}
	if m.Model != nil {
		fmt.Fprintf(w, "model.primary\t%s\n", model(m.Model.Primary))
		var fb []string
		for _, f := range m.Model.Fallbacks {
			fb = append(fb, model(f))
		}
		list("model.fallbacks", fb, "none")
		fmt.Fprintf(w, "model.pin\t%v\n", m.Model.Pin != nil && *m.Model.Pin)
	} else {
		fmt.Fprintf(w, "model\tthe machine's pi default\n")
	}
	if m.Review != nil && m.Review.MaxRejects != nil {
		fmt.Fprintf(w, "review.maxRejects\t%s\n", num(m.Review.MaxRejects))
	} else {
		fmt.Fprintf(w, "review.maxRejects\t%d (default)\n", fleet.DefaultMaxRejects)
	}
	if b := m.Budget; b != nil {
		fmt.Fprintf(w, "budget\tmaxCost %s, maxTurns %s, maxMinutes %s\n", num(b.MaxCost), num(b.MaxTurns), num(b.MaxMinutes))
	} else {
		fmt.Fprintf(w, "budget\tnone\n")
	}
	var answers []string
	if m.UI != nil {
		for _, a := range m.UI.AutoAnswer {
			if a.Bool != nil {
				answers = append(answers, fmt.Sprintf("%s=%v", a.Key, *a.Bool))
			} else {
				answers = append(answers, fmt.Sprintf("%s=%q", a.Key, a.Text))
			}
		}
	}
	list("ui.autoAnswer", answers, "none")
}
