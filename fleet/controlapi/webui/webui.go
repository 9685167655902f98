package webui

import (
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strings"

	"github.com/rs/zerolog"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/transport"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// ContentSecurityPolicy is sent with every answer: scripts, styles and
// connections from the page's own origin only, nothing inline, no frames,
// forms that post only here.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

var pages = template.Must(template.ParseFS(templateFS, "templates/*.html"))

// Options tune the handler.
type Options struct {
	// Hosts, when not empty, are the only Host headers answered (the
	// listener's address, localhost:PORT): a page another site resolves
	// to loopback (DNS rebinding) gets nothing.
	Hosts []string
	// Log logs refused logins (default zerolog.Nop()).
	Log *zerolog.Logger
}

// Handler serves the page, its assets and its login, and passes /v1/ to
// the control API.
type Handler struct {
	api   http.Handler
	auth  *controlapi.WebAuth
	opts  Options
	log   zerolog.Logger
	mux   *http.ServeMux
	index indexData
}

// indexData is what the page template renders besides the CSRF token.
type indexData struct {
	CSRF         string
	InstanceSVG  template.HTML
	AgentSVG     template.HTML
	Transitions  map[string]map[string][][2]string // machine → state → [[event, destination]…]
	InstanceName string
	AgentName    string
}

// New returns the page's handler. api is the control API handler
// (controlapi.NewServer with WithWebAuth(auth) and the token): every
// request the page makes goes through it, so the page can do exactly what
// the control API lets a session do, and nothing else.
func New(api http.Handler, auth *controlapi.WebAuth, opts Options) *Handler {
	h := &Handler{api: api, auth: auth, opts: opts, log: zerolog.Nop(), mux: http.NewServeMux()}
	if opts.Log != nil {
		h.log = *opts.Log
	}
	inst, conn := fleet.InstanceTable, transport.ConnectionTable
	tr := map[string]map[string][][2]string{"instance": transitions(inst), "agent": transitions(conn)}
	h.index = indexData{InstanceSVG: diagramSVG(inst), AgentSVG: diagramSVG(conn), Transitions: tr,
		InstanceName: inst.Name(), AgentName: conn.Name()}

	static, _ := fs.Sub(staticFS, "static")
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	h.mux.HandleFunc("GET "+controlapi.LoginPath, h.loginLink)
	h.mux.HandleFunc("POST "+controlapi.LoginPath, h.loginForm)
	h.mux.HandleFunc("POST /logout", h.logout)
	h.mux.HandleFunc("GET /{$}", h.page)
	h.mux.Handle("/"+controlapi.APIVersion+"/", api)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	return h
}

// ServeHTTP sets the security headers and routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	if len(h.opts.Hosts) > 0 && !h.hostAllowed(r.Host) {
		http.Error(w, "unknown host "+r.Host, http.StatusMisdirectedRequest)
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) hostAllowed(host string) bool {
	for _, a := range h.opts.Hosts {
		if strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// LoopbackHosts are the Host headers a page listening at addr (a loopback
// host:port) is reached by.
func LoopbackHosts(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []string{addr}
	}
	hosts := []string{net.JoinHostPort(host, port), net.JoinHostPort("localhost", port)}
	if host == "::1" || host == "127.0.0.1" {
		return hosts
	}
	return append(hosts, net.JoinHostPort("127.0.0.1", port))
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	csrf, ok := h.auth.Session(r)
	if !ok {
		h.loginPage(w, http.StatusOK, "")
		return
	}
	d := h.index
	d.CSRF = csrf
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pages.ExecuteTemplate(w, "index.html", d); err != nil {
		h.log.Error().Err(err).Msg("web page")
	}
}

func (h *Handler) loginPage(w http.ResponseWriter, status int, problem string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, "login.html", map[string]string{"Problem": problem}); err != nil {
		h.log.Error().Err(err).Msg("login page")
	}
}

// loginLink redeems the one-time login of `pifleet-server ui`, then
// sends the browser to the page, so the code leaves the address bar.
func (h *Handler) loginLink(w http.ResponseWriter, r *http.Request) {
	if err := h.auth.Redeem(w, r.URL.Query().Get("code")); err != nil {
		h.log.Warn().Str("remote", r.RemoteAddr).Msg("web login refused: unknown, used or expired link")
		h.loginPage(w, http.StatusUnauthorized, "This login link is unknown, already used or expired. Run pifleet-server ui for a new one.")
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// loginForm logs in with the control token pasted into the form; only
// from the page itself.
func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		h.loginPage(w, http.StatusForbidden, "Logins are accepted from this page only.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	err := h.auth.LoginWithToken(w, strings.TrimSpace(r.PostFormValue("token")))
	if err != nil {
		if !errors.Is(err, controlapi.ErrLoginInvalid) {
			h.log.Debug().Err(err).Msg("web login form")
		}
		h.log.Warn().Str("remote", r.RemoteAddr).Msg("web login refused: wrong token")
		h.loginPage(w, http.StatusUnauthorized, "That is not the control token.")
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout needs the CSRF token: another site must not log the user out.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	csrf, ok := h.auth.Session(r)
	if !ok || subtle.ConstantTimeCompare([]byte(r.Header.Get(controlapi.CSRFHeader)), []byte(csrf)) != 1 {
		http.Error(w, "missing or wrong "+controlapi.CSRFHeader, http.StatusForbidden)
		return
	}
	h.auth.Logout(w, r)
	w.WriteHeader(http.StatusNoContent)
}
