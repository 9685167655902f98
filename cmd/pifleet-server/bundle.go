package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle/registry"
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
	Name  string `help:"Bundle name (letters, digits, '.', '_', '-')." required:"" env:"PIFLEET_BUNDLE_NAME"`
	Quiet bool   `help:"Print only the bundleHash." short:"q" env:"PIFLEET_QUIET"`
	Src   string `arg:"" help:"Source directory; its bundle.json holds the metadata." type:"existingdir"`
}

// Run publishes the bundle.
func (c *BundlePublishCmd) Run(parent *BundleCmd, log zerolog.Logger, out *Output) error {
	m, err := registry.Publish(parent.Registry, c.Name, c.Src, registry.PublishOptions{})
	if err != nil {
		return err
	}
	log.Debug().Str("bundle", m.Name).Str("bundleHash", m.BundleHash).Int("files", len(m.Files)).Str("registry", parent.Registry).Msg("bundle published")
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
	fmt.Fprintf(tw, "name\t%s\n", m.Name)
	fmt.Fprintf(tw, "bundleHash\t%s\n", m.BundleHash)
	row := func(key string, list []string) {
		if list != nil {
			fmt.Fprintf(tw, "%s\t%v\n", key, list)
		}
	}
	row("platforms", m.Platforms)
	row("extensions", m.Extensions)
	row("skills", m.Skills)
	row("prompts", m.Prompts)
	if m.Tools != nil {
		row("tools", m.Tools.Active)
	}
	if m.Model != nil {
		fmt.Fprintf(tw, "model\t%s/%s\n", m.Model.Primary.Provider, m.Model.Primary.ID)
	}
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
