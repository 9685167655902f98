package controlapi

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Browser sessions of the web page.
const (
	// SessionCookie is the cookie that carries a browser session: HttpOnly,
	// SameSite=Strict, scoped to the page's origin.
	SessionCookie = "pifleet_session"
	// CSRFHeader must carry the session's CSRF token on every request
	// that changes something (any method but GET and HEAD).
	CSRFHeader = "X-CSRF-Token"
	// LoginPath is where the page redeems a one-time login.
	LoginPath = "/login"

	// DefaultLoginTTL bounds how long a one-time login may wait to be
	// redeemed, and DefaultSessionTTL how long a browser session lives.
	DefaultLoginTTL   = 5 * time.Minute
	DefaultSessionTTL = 12 * time.Hour

	// maxLogins and maxWebSessions bound the memory a flood of logins can
	// take: the oldest go first.
	maxLogins      = 64
	maxWebSessions = 256
)

// WebLogin is a one-time login for the web page (POST /v1/web/logins).
type WebLogin struct {
	// URL opens the page and logs the browser in; it works once, before
	// ExpiresAt.
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// ErrLoginInvalid is returned for a one-time login or a token that is
// unknown, used or expired.
var ErrLoginInvalid = errors.New("controlapi: login is unknown, already used or expired")

// WebAuth turns one-time logins, or the control token itself, into browser
// sessions: a random session id in an HttpOnly, SameSite=Strict cookie,
// with a CSRF token the page sends back in CSRFHeader. A Server given
// WithWebAuth accepts such a session in place of the bearer token and
// checks the CSRF token there, so the control API stays the one place
// where access is decided. Sessions live in memory: a restart of the
// server logs every browser out.
//
// A WebAuth is safe for concurrent use.
type WebAuth struct {
	baseURL    string
	token      string
	secure     bool
	loginTTL   time.Duration
	sessionTTL time.Duration
	now        func() time.Time

	mu       sync.Mutex
	logins   map[[32]byte]time.Time // by the code's hash: expiry
	sessions map[[32]byte]*webSession
}

type webSession struct {
	csrf    string
	expires time.Time
	created time.Time
}

// WebAuthOption configures a WebAuth.
type WebAuthOption func(*WebAuth)

// WithClock makes a WebAuth read time from now (tests).
func WithClock(now func() time.Time) WebAuthOption { return func(a *WebAuth) { a.now = now } }

// WithTTLs sets how long a one-time login and a session live.
func WithTTLs(login, session time.Duration) WebAuthOption {
	return func(a *WebAuth) { a.loginTTL, a.sessionTTL = login, session }
}

// NewWebAuth returns the sessions of the page served at baseURL
// (http://127.0.0.1:9791); token, when not empty, may also be pasted into
// the login form. An https baseURL makes the cookie Secure.
func NewWebAuth(baseURL, token string, opts ...WebAuthOption) *WebAuth {
	a := &WebAuth{baseURL: baseURL, token: token, loginTTL: DefaultLoginTTL, sessionTTL: DefaultSessionTTL,
		now: time.Now, logins: map[[32]byte]time.Time{}, sessions: map[[32]byte]*webSession{}}
	if u, err := url.Parse(baseURL); err == nil && u.Scheme == "https" {
		a.secure = true
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// BaseURL is the page's address.
func (a *WebAuth) BaseURL() string { return a.baseURL }

// NewLogin mints a one-time login.
func (a *WebAuth) NewLogin() WebLogin {
	code := rand.Text() + rand.Text()
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	a.purgeLocked(now)
	if len(a.logins) >= maxLogins {
		evictOldest(a.logins, func(t time.Time) time.Time { return t })
	}
	exp := now.Add(a.loginTTL)
	a.logins[sha256.Sum256([]byte(code))] = exp
	return WebLogin{URL: a.baseURL + LoginPath + "?code=" + url.QueryEscape(code), ExpiresAt: exp}
}

// Redeem spends a one-time login and sets the session cookie on w.
func (a *WebAuth) Redeem(w http.ResponseWriter, code string) error {
	key := sha256.Sum256([]byte(code))
	a.mu.Lock()
	exp, ok := a.logins[key]
	delete(a.logins, key)
	a.mu.Unlock()
	if !ok || !a.now().Before(exp) {
		return ErrLoginInvalid
	}
	a.startSession(w)
	return nil
}

// LoginWithToken starts a session for whoever presents the control token.
func (a *WebAuth) LoginWithToken(w http.ResponseWriter, token string) error {
	if a.token == "" || !tokenMatches(token, a.token) {
		return ErrLoginInvalid
	}
	a.startSession(w)
	return nil
}

func (a *WebAuth) startSession(w http.ResponseWriter) {
	id := rand.Text() + rand.Text()
	a.mu.Lock()
	now := a.now()
	a.purgeLocked(now)
	if len(a.sessions) >= maxWebSessions {
		evictOldest(a.sessions, func(s *webSession) time.Time { return s.created })
	}
	s := &webSession{csrf: rand.Text() + rand.Text(), expires: now.Add(a.sessionTTL), created: now}
	a.sessions[sha256.Sum256([]byte(id))] = s
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: a.secure, MaxAge: int(a.sessionTTL / time.Second)})
}

// Session returns the CSRF token of the request's browser session; ok is
// false without a live session.
func (a *WebAuth) Session(r *http.Request) (csrf string, ok bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return "", false
	}
	key := sha256.Sum256([]byte(c.Value))
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[key]
	if s == nil {
		return "", false
	}
	if !a.now().Before(s.expires) {
		delete(a.sessions, key)
		return "", false
	}
	return s.csrf, true
}

// Logout ends the request's session and clears its cookie.
func (a *WebAuth) Logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		a.mu.Lock()
		delete(a.sessions, sha256.Sum256([]byte(c.Value)))
		a.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: a.secure, MaxAge: -1})
}

// checkBrowser applies the rules of a request authenticated by a session
// cookie: never from another site, and, when it changes something, with
// the session's CSRF token.
func checkBrowser(r *http.Request, csrf string) *Error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return &Error{Code: CodeCSRFRefused, Message: "cross-site request refused"}
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(csrf)) != 1 {
		return &Error{Code: CodeCSRFRefused, Message: "missing or wrong " + CSRFHeader + " header"}
	}
	return nil
}

func (a *WebAuth) purgeLocked(now time.Time) {
	for k, exp := range a.logins {
		if !now.Before(exp) {
			delete(a.logins, k)
		}
	}
	for k, s := range a.sessions {
		if !now.Before(s.expires) {
			delete(a.sessions, k)
		}
	}
}

func evictOldest[V any](m map[[32]byte]V, at func(V) time.Time) {
	var (
		oldest [32]byte
		when   time.Time
		found  bool
	)
	for k, v := range m {
		if t := at(v); !found || t.Before(when) {
			oldest, when, found = k, t, true
		}
	}
	if found {
		delete(m, oldest)
	}
}
