package registry

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/pathsafe"
)

// Gate decides whether a peer may use the registry. It returns nil to
// admit the peer and an error (logged, never sent) to refuse it with 403.
// Identity and trust live elsewhere (a tailnet whois, a static map); the
// registry only asks.
type Gate func(ctx context.Context, peer netip.Addr) error

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithGate admits only the peers gate admits; every request of any other
// peer, /healthz included, is answered 403 {"error":"forbidden"}.
func WithGate(gate Gate) ServerOption { return func(s *Server) { s.gate = gate } }

// WithLogger logs refusals and failures to log.
func WithLogger(log zerolog.Logger) ServerOption {
	return func(s *Server) { s.log = log.With().Str("component", "registry").Logger() }
}

// Server serves the registry at a root directory over HTTP. It is an
// http.Handler, safe for concurrent use.
type Server struct {
	root string
	gate Gate
	log  zerolog.Logger

	manifests manifestCache
}

// NewServer returns a server for the registry at root.
func NewServer(root string, opts ...ServerOption) *Server {
	s := &Server{root: root, log: zerolog.Nop()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// The JSON bodies the server answers with.
var (
	bodyHealth     = []byte(`{"ok":true,"service":"pi-fleet-registry"}`)
	errForbidden   = "forbidden"
	errMethod      = "method_not_allowed"
	errNotFound    = "not_found"
	errBadName     = "invalid_bundle_name"
	errNoBundle    = "bundle_not_found"
	errUnsafePath  = "unsafe_path"
	errNotListed   = "file_not_in_manifest"
	errFileMissing = "file_missing"
)

// ServeHTTP answers one request, checking in this order (the TypeScript
// registry's): gate,
// method, /healthz, route, bundle name, manifest, then the file.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.gate != nil {
		peer := peerAddr(r.RemoteAddr)
		if err := s.gate(r.Context(), peer); err != nil {
			s.log.Warn().Err(err).Str("peer", r.RemoteAddr).Msg("registry request refused by the gate")
			writeError(w, http.StatusForbidden, errForbidden)
			return
		}
	}
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, errMethod)
		return
	}
	p := r.URL.EscapedPath()
	if p == "/healthz" {
		writeJSON(w, http.StatusOK, bodyHealth)
		return
	}
	rawName, kind, ok := route(p)
	if !ok {
		writeError(w, http.StatusNotFound, errNotFound)
		return
	}
	name, err := url.PathUnescape(rawName)
	if err != nil || bundle.ValidName(name) != nil {
		writeError(w, http.StatusBadRequest, errBadName)
		return
	}
	loaded, fresh, err := s.manifests.load(manifestPath(s.root, name))
	if err != nil {
		if fresh {
			s.log.Warn().Err(err).Str("bundle", name).Msg("cannot serve bundle: manifest unreadable or invalid")
		}
		writeError(w, http.StatusNotFound, errNoBundle)
		return
	}
	if kind == "manifest" {
		// The ETag lets a client that holds this very manifest skip the
		// body (pifleet clients send If-None-Match; others are unaffected).
		w.Header().Set("ETag", loaded.etag)
		if r.Header.Get("If-None-Match") == loaded.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(loaded.m.Raw)))
		w.WriteHeader(http.StatusOK)
		w.Write(loaded.m.Raw)
		return
	}
	s.serveFile(w, r, name, loaded.m)
}

// route splits /v1/bundles/<name>/(manifest|file).
func route(p string) (name, kind string, ok bool) {
	rest, found := strings.CutPrefix(p, "/v1/bundles/")
	if !found {
		return "", "", false
	}
	name, kind, found = strings.Cut(rest, "/")
	if !found || name == "" || (kind != "manifest" && kind != "file") {
		return "", "", false
	}
	return name, kind, true
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, name string, m *bundle.Manifest) {
	path, pathErr := queryParam(r.URL.RawQuery, "path")
	hash, hashErr := queryParam(r.URL.RawQuery, "hash")
	if pathErr != nil || pathsafe.Check(path) != nil {
		writeError(w, http.StatusBadRequest, errUnsafePath)
		return
	}
	f, listed := m.Lookup(path)
	if hashErr != nil || !listed || f.SHA256 != hash {
		writeError(w, http.StatusNotFound, errNotListed)
		return
	}
	native, err := pathsafe.Join(filepath.Join(s.root, name, FilesDir), path)
	if err != nil {
		writeError(w, http.StatusBadRequest, errUnsafePath)
		return
	}
	file, err := os.Open(native)
	if err != nil {
		s.log.Warn().Err(err).Str("bundle", name).Str("path", path).Msg("published file missing")
		writeError(w, http.StatusNotFound, errFileMissing)
		return
	}
	defer file.Close()
	fi, err := file.Stat()
	// A file of the wrong size is not the published content (a registry
	// edited by hand, or a publish that died): refusing it is cheaper for
	// everyone than sending bytes the client will reject.
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != f.Bytes {
		s.log.Warn().Str("bundle", name).Str("path", path).Msg("published file does not match the manifest")
		writeError(w, http.StatusNotFound, errFileMissing)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	w.WriteHeader(http.StatusOK)
	io.Copy(w, file) // sendfile; a client that goes away mid-body is its own problem
}

// queryParam returns the first value of key in a raw query, decoded as
// URLSearchParams decodes it ("+" is a space). Malformed percent-encoding
// is an error (the reference answers 500; we answer 400).
func queryParam(raw, key string) (string, error) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(pair, "=")
		dk, err := url.QueryUnescape(k)
		if err != nil {
			return "", err
		}
		if dk == key {
			return url.QueryUnescape(v)
		}
	}
	return "", nil
}

// peerAddr parses http.Request.RemoteAddr, mapping IPv4-in-IPv6 to IPv4.
func peerAddr(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func writeError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, []byte(`{"error":"`+code+`"}`))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// sameVersion reports whether two stats describe the same manifest.json:
// the same file (publishing renames a new one into place), unmodified.
func sameVersion(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
