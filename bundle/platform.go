package bundle

import (
	"runtime"
	"slices"
)

// HostPlatform returns the platform this process runs on, named as Node
// names it (process.platform), the names bundle manifests and hello
// frames use: linux, darwin, win32, freebsd, openbsd, sunos, aix, android.
func HostPlatform() string { return NodePlatform(runtime.GOOS) }

// NodePlatform maps a GOOS value to Node's platform name.
func NodePlatform(goos string) string {
	switch goos {
	case "windows":
		return "win32"
	case "solaris", "illumos":
		return "sunos"
	}
	return goos
}

// CheckPlatform returns nil when the bundle runs on platform (a Node
// platform name) and a *PlatformError otherwise. A bundle without
// platforms runs everywhere. It needs nothing but the manifest, so an
// agent can refuse a spawn before any process starts.
func (m *Manifest) CheckPlatform(platform string) error {
	if len(m.Platforms) == 0 || slices.Contains(m.Platforms, platform) {
		return nil
	}
	return &PlatformError{Bundle: m.Name, Platform: platform, Supported: slices.Clone(m.Platforms)}
}

// CheckPinnedHash returns nil when pinned is empty or is the manifest's
// bundleHash, and a *HashPinError otherwise: a server checks it against the
// registry before it asks an agent to start the bundle, so that no agent
// (whether or not it checks the pin itself) starts another version.
func (m *Manifest) CheckPinnedHash(pinned string) error {
	if pinned == "" || pinned == m.BundleHash {
		return nil
	}
	return &HashPinError{Bundle: m.Name, Pinned: pinned, Served: m.BundleHash}
}
