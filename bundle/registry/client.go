package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/pathsafe"
)

// Client fetches bundles from a registry. Implementations are safe for
// concurrent use.
type Client interface {
	// Origin names the registry in messages and records: its URL.
	Origin() string
	// Manifest fetches and validates the manifest of bundle name. It fails
	// with a *Error: not_found, unreachable, or invalid_manifest.
	Manifest(ctx context.Context, name string) (*bundle.Manifest, error)
	// Open streams the content of file f of bundle name. The caller checks
	// the bytes against f.SHA256 and closes the reader.
	Open(ctx context.Context, name string, f bundle.File) (io.ReadCloser, error)
}

// DefaultTimeout bounds one registry request, body included (the protocol's
// request timeout).
const DefaultTimeout = 60 * time.Second

// ClientOption configures Open and NewHTTP.
type ClientOption func(*clientConfig)

type clientConfig struct {
	timeout time.Duration
	http    *http.Client
}

// WithTimeout bounds each request (manifest, or one file with its body);
// zero or less means no bound.
func WithTimeout(d time.Duration) ClientOption { return func(c *clientConfig) { c.timeout = d } }

// WithHTTPClient sends requests with hc (for TLS settings, proxies, tests).
// By default a client keeps enough idle connections per host for a
// parallel sync.
func WithHTTPClient(hc *http.Client) ClientOption { return func(c *clientConfig) { c.http = hc } }

// Open returns the client for a registry location as PI_FLEET_SERVER gives
// it: an http:// or https:// URL, a file:// URL, or a
// plain directory path.
func Open(location string, opts ...ClientOption) (Client, error) {
	switch {
	case location == "":
		return nil, errors.New("registry: empty location")
	case strings.HasPrefix(location, "http://"), strings.HasPrefix(location, "https://"):
		return NewHTTP(location, opts...)
	case strings.HasPrefix(location, "file://"):
		u, err := url.Parse(location)
		if err != nil {
			return nil, fmt.Errorf("registry: bad file URL %q: %w", location, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("registry: file URL %q names a remote host", location)
		}
		p := u.Path
		if runtime.GOOS == "windows" && len(p) >= 3 && p[0] == '/' && p[2] == ':' {
			p = p[1:] // file:///C:/x
		}
		return NewDir(filepath.FromSlash(p)), nil
	default:
		return NewDir(location), nil
	}
}

// HTTP is a registry served over HTTP (Server, or a TypeScript pi-fleet
// server).
//
// It remembers the last manifest of each bundle: when the registry answers
// that it has not changed (304, to the If-None-Match a Server understands)
// or sends the very same bytes, the parsed manifest is reused, which makes
// a warm sync of a large bundle cost one round trip.
type HTTP struct {
	base    string
	timeout time.Duration
	hc      *http.Client

	mu   sync.Mutex
	memo map[string]memoManifest
}

// memoManifest is the last manifest received for a bundle.
type memoManifest struct {
	etag string
	body []byte
	m    *bundle.Manifest
}

// NewHTTP returns a client for the registry at base, an http(s) URL.
func NewHTTP(base string, opts ...ClientOption) (*HTTP, error) {
	cfg := clientConfig{timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("registry: %q is not an http(s) URL", base)
	}
	if cfg.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// The default keeps 2 idle connections per host: a sync with 8
		// parallel fetches would open and close connections all the time.
		t.MaxIdleConnsPerHost = 64
		cfg.http = &http.Client{Transport: t}
	}
	return &HTTP{base: strings.TrimRight(base, "/"), timeout: cfg.timeout, hc: cfg.http}, nil
}

// Origin returns the base URL.
func (c *HTTP) Origin() string { return c.base }

// CloseIdleConnections closes the connections kept open for the next
// request; a client that is dropped should be closed this way.
func (c *HTTP) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Manifest fetches GET /v1/bundles/<name>/manifest.
func (c *HTTP) Manifest(ctx context.Context, name string) (*bundle.Manifest, error) {
	fail := func(code bundle.ErrorCode, status int, err error) error {
		return &Error{Code: code, Registry: c.base, Bundle: name, Status: status, Err: err}
	}
	if err := bundle.ValidName(name); err != nil {
		return nil, fail(bundle.CodeNotFound, 0, err)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/bundles/"+url.PathEscape(name)+"/manifest", nil)
	if err != nil {
		return nil, fail(bundle.CodeUnreachable, 0, err)
	}
	c.mu.Lock()
	memo, remembered := c.memo[name]
	c.mu.Unlock()
	if remembered && memo.etag != "" {
		req.Header.Set("If-None-Match", memo.etag)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fail(bundle.CodeUnreachable, 0, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && remembered:
		return memo.m, nil
	case resp.StatusCode == http.StatusNotFound:
		return nil, fail(bundle.CodeNotFound, resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode))
	case resp.StatusCode/100 != 2:
		return nil, fail(bundle.CodeUnreachable, resp.StatusCode, fmt.Errorf("manifest fetch failed: HTTP %d", resp.StatusCode))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, bundle.MaxManifestBytes+1))
	if err != nil {
		return nil, fail(bundle.CodeUnreachable, resp.StatusCode, fmt.Errorf("reading manifest: %w", err))
	}
	if remembered && bytes.Equal(data, memo.body) {
		return memo.m, nil
	}
	m, err := bundle.ParseManifest(data)
	if err != nil {
		return nil, fail(bundle.CodeInvalidManifest, resp.StatusCode, err)
	}
	c.mu.Lock()
	if c.memo == nil {
		c.memo = make(map[string]memoManifest)
	}
	c.memo[name] = memoManifest{etag: resp.Header.Get("ETag"), body: data, m: m}
	c.mu.Unlock()
	return m, nil
}

// Open fetches GET /v1/bundles/<name>/file?path=&hash=.
func (c *HTTP) Open(ctx context.Context, name string, f bundle.File) (io.ReadCloser, error) {
	fail := func(code bundle.ErrorCode, status int, err error) error {
		return &Error{Code: code, Registry: c.base, Bundle: name, Path: f.Path, Status: status, Err: err}
	}
	ctx, cancel := c.withTimeout(ctx)
	q := url.Values{"path": {f.Path}, "hash": {f.SHA256}}
	resp, err := c.get(ctx, c.base+"/v1/bundles/"+url.PathEscape(name)+"/file?"+q.Encode())
	if err != nil {
		cancel()
		return nil, fail(bundle.CodeUnreachable, 0, err)
	}
	if resp.StatusCode/100 != 2 {
		resp.Body.Close()
		cancel()
		code := bundle.CodeUnreachable
		if resp.StatusCode == http.StatusNotFound {
			code = bundle.CodeNotFound
		}
		return nil, fail(code, resp.StatusCode, fmt.Errorf("HTTP %d fetching %s", resp.StatusCode, f.Path))
	}
	return &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}, nil
}

func (c *HTTP) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

func (c *HTTP) get(ctx context.Context, u string) (*http.Response, error) {
	// (Manifest builds its own request, to add If-None-Match.)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return c.hc.Do(req)
}

// cancelOnClose ends a request's timeout when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// Dir is a registry directory read directly (a file:// URL or a plain path
// in PI_FLEET_SERVER; also handy in tests). Like Server, it parses a
// manifest again only when its file changed.
type Dir struct {
	root      string
	origin    string
	manifests manifestCache
}

// NewDir returns a client for the registry directory root.
func NewDir(root string) *Dir {
	origin := root
	if abs, err := filepath.Abs(root); err == nil {
		origin = (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
		if !strings.HasPrefix(origin, "file:///") {
			origin = strings.Replace(origin, "file://", "file:///", 1) // Windows drive paths
		}
	}
	return &Dir{root: root, origin: origin}
}

// Origin returns the directory as a file:// URL.
func (d *Dir) Origin() string { return d.origin }

// Manifest reads <root>/<name>/manifest.json. A missing file is not_found;
// any other read failure is unreachable.
func (d *Dir) Manifest(ctx context.Context, name string) (*bundle.Manifest, error) {
	if err := ctx.Err(); err != nil {
		return nil, &Error{Code: bundle.CodeUnreachable, Registry: d.origin, Bundle: name, Err: err}
	}
	if err := bundle.ValidName(name); err != nil {
		return nil, &Error{Code: bundle.CodeNotFound, Registry: d.origin, Bundle: name, Err: err}
	}
	return d.readManifest(name)
}

func (d *Dir) readManifest(name string) (*bundle.Manifest, error) {
	loaded, _, err := d.manifests.load(manifestPath(d.root, name))
	switch {
	case err == nil:
		return loaded.m, nil
	case isNotExist(err):
		return nil, &Error{Code: bundle.CodeNotFound, Registry: d.origin, Bundle: name, Err: err}
	case errors.Is(err, bundle.CodeInvalidManifest), errors.Is(err, bundle.CodeUnsafePath):
		return nil, &Error{Code: bundle.CodeInvalidManifest, Registry: d.origin, Bundle: name, Err: err}
	default:
		return nil, &Error{Code: bundle.CodeUnreachable, Registry: d.origin, Bundle: name, Err: err}
	}
}

// Open opens <root>/<name>/files/<path>.
func (d *Dir) Open(ctx context.Context, name string, f bundle.File) (io.ReadCloser, error) {
	fail := func(code bundle.ErrorCode, err error) error {
		return &Error{Code: code, Registry: d.origin, Bundle: name, Path: f.Path, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(bundle.CodeUnreachable, err)
	}
	if err := bundle.ValidName(name); err != nil {
		return nil, fail(bundle.CodeNotFound, err)
	}
	native, err := pathsafe.Join(filepath.Join(d.root, name, FilesDir), f.Path)
	if err != nil {
		return nil, fail(bundle.CodeNotFound, err)
	}
	file, err := os.Open(native)
	if isNotExist(err) {
		return nil, fail(bundle.CodeNotFound, err)
	}
	if err != nil {
		return nil, fail(bundle.CodeUnreachable, err)
	}
	return file, nil
}
