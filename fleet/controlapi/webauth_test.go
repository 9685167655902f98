package controlapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// webClock is an explicit clock for the login and session lifetimes.
type webClock struct{ t time.Time }

func (c *webClock) now() time.Time { return c.t }

func loginCode(t *testing.T, l WebLogin) string {
	t.Helper()
	u, err := url.Parse(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Path != LoginPath {
		t.Fatalf("login URL %s: path %q, want %q", l.URL, u.Path, LoginPath)
	}
	return u.Query().Get("code")
}

// redeem spends code and returns the session cookie it set.
func redeem(t *testing.T, a *WebAuth, code string) (*http.Cookie, error) {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := a.Redeem(rec, code); err != nil {
		return nil, err
	}
	cs := rec.Result().Cookies()
	if len(cs) != 1 || cs[0].Name != SessionCookie {
		t.Fatalf("cookies %v, want one %s", cs, SessionCookie)
	}
	return cs[0], nil
}

func TestWebLoginIsOneTimeAndExpires(t *testing.T) {
	clk := &webClock{t: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)}
	a := NewWebAuth("http://127.0.0.1:9791", "tok", WithClock(clk.now), WithTTLs(time.Minute, time.Hour))

	l := a.NewLogin()
	if !strings.HasPrefix(l.URL, "http://127.0.0.1:9791/login?code=") || !l.ExpiresAt.Equal(clk.t.Add(time.Minute)) {
		t.Fatalf("login %+v", l)
	}
	code := loginCode(t, l)
	c, err := redeem(t, a, code)
	if err != nil {
		t.Fatal(err)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure on http", c)
	}
	if _, err := redeem(t, a, code); !errors.Is(err, ErrLoginInvalid) {
		t.Errorf("second redeem: %v, want ErrLoginInvalid", err)
	}

	late := loginCode(t, a.NewLogin())
	clk.t = clk.t.Add(time.Minute)
	if _, err := redeem(t, a, late); !errors.Is(err, ErrLoginInvalid) {
		t.Errorf("redeem at expiry: %v, want ErrLoginInvalid", err)
	}

	// The session itself ends after its lifetime.
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(c)
	if _, ok := a.Session(r); !ok {
		t.Fatal("session not live after login")
	}
	clk.t = clk.t.Add(time.Hour)
	if _, ok := a.Session(r); ok {
		t.Error("session live after its lifetime")
	}
}

func TestWebLoginWithToken(t *testing.T) {
	a := NewWebAuth("https://fleet.example:9791", "tok")
	if err := a.LoginWithToken(httptest.NewRecorder(), "wrong"); !errors.Is(err, ErrLoginInvalid) {
		t.Errorf("wrong token: %v", err)
	}
	rec := httptest.NewRecorder()
	if err := a.LoginWithToken(rec, "tok"); err != nil {
		t.Fatal(err)
	}
	if c := rec.Result().Cookies(); len(c) != 1 || !c[0].Secure {
		t.Errorf("https page: cookies %v, want one Secure", c)
	}
	if err := NewWebAuth("http://x", "").LoginWithToken(httptest.NewRecorder(), ""); !errors.Is(err, ErrLoginInvalid) {
		t.Errorf("no token configured, empty token: %v", err)
	}
}

func TestWebLoginsAreBounded(t *testing.T) {
	a := NewWebAuth("http://x", "")
	first := loginCode(t, a.NewLogin())
	for range maxLogins {
		a.NewLogin()
	}
	if _, err := redeem(t, a, first); !errors.Is(err, ErrLoginInvalid) {
		t.Errorf("the oldest of %d+1 pending logins still redeems: %v", maxLogins, err)
	}
}

// TestBrowserSessionRules drives a Server over a WebAuth: a cookie stands
// for the token, every change needs the CSRF token, nothing from another
// site passes, and a browser cannot mint logins.
func TestBrowserSessionRules(t *testing.T) {
	b := newRecordingBackend()
	a := NewWebAuth("http://127.0.0.1:9791", "tok")
	srv := NewServer(b, WithToken("tok"), WithWebAuth(a))
	cookie, err := redeem(t, a, loginCode(t, a.NewLogin()))
	if err != nil {
		t.Fatal(err)
	}
	csrfReq := httptest.NewRequest("GET", "/", nil)
	csrfReq.AddCookie(cookie)
	csrf, _ := a.Session(csrfReq)

	do := func(method, path, body string, set func(*http.Request)) (int, Code) {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if set != nil {
			set(r)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		var e Error
		if rec.Code >= 300 {
			_ = json.Unmarshal(rec.Body.Bytes(), &e)
		}
		return rec.Code, e.Code
	}
	withCookie := func(r *http.Request) { r.AddCookie(cookie) }
	withCSRF := func(r *http.Request) { r.AddCookie(cookie); r.Header.Set(CSRFHeader, csrf) }
	accept := `{"disposition":"stop"}`

	cases := []struct {
		name       string
		method     string
		path, body string
		set        func(*http.Request)
		status     int
		code       Code
	}{
		{"no credentials", "GET", "/v1/status", "", nil, 401, CodeUnauthorized},
		{"unknown cookie", "GET", "/v1/status", "", func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: SessionCookie, Value: "forged"})
		}, 401, CodeUnauthorized},
		{"cookie reads", "GET", "/v1/status", "", withCookie, 200, ""},
		{"cookie without CSRF cannot change", "POST", "/v1/tasks/t-1/accept", accept, withCookie, 403, CodeCSRFRefused},
		{"cookie with a wrong CSRF token", "POST", "/v1/tasks/t-1/accept", accept, func(r *http.Request) {
			withCookie(r)
			r.Header.Set(CSRFHeader, csrf+"x")
		}, 403, CodeCSRFRefused},
		{"CSRF token without cookie", "POST", "/v1/tasks/t-1/accept", accept, func(r *http.Request) {
			r.Header.Set(CSRFHeader, csrf)
		}, 401, CodeUnauthorized},
		{"cookie and CSRF change", "POST", "/v1/tasks/t-1/accept", accept, withCSRF, 204, ""},
		{"cross-site read refused", "GET", "/v1/status", "", func(r *http.Request) {
			withCookie(r)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
		}, 403, CodeCSRFRefused},
		{"same-site but other origin refused", "POST", "/v1/tasks/t-1/accept", accept, func(r *http.Request) {
			withCSRF(r)
			r.Header.Set("Sec-Fetch-Site", "same-site")
		}, 403, CodeCSRFRefused},
		{"browser cannot mint logins", "POST", "/v1/web/logins", "", withCSRF, 401, CodeUnauthorized},
		{"bearer mints logins", "POST", "/v1/web/logins", "", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer tok")
		}, 200, ""},
		{"wrong bearer is not rescued by a cookie", "GET", "/v1/status", "", func(r *http.Request) {
			withCookie(r)
			r.Header.Set("Authorization", "Bearer nope")
		}, 401, CodeUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, code := do(c.method, c.path, c.body, c.set)
			if status != c.status || code != c.code {
				t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, status, code, c.status, c.code)
			}
		})
	}
	if got := b.Calls(); got != "Status\nAccept t-1 stop" {
		t.Errorf("backend calls:\n%s\nwant only the admitted status and accept", got)
	}
}

func TestWebLoginsNeedAWebPage(t *testing.T) {
	rec := httptest.NewRecorder()
	NewServer(newRecordingBackend()).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/web/logins", nil))
	if rec.Code != http.StatusNotImplemented || !strings.Contains(rec.Body.String(), "--ui") {
		t.Errorf("no WebAuth: %d %s, want 501 naming --ui", rec.Code, rec.Body)
	}
	// A socket server that mints logins stays open to its socket's clients.
	rec = httptest.NewRecorder()
	NewServer(newRecordingBackend(), WithWebAuth(NewWebAuth("http://x", ""))).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/web/logins", nil))
	if rec.Code != 200 {
		t.Errorf("socket server mints: %d %s", rec.Code, rec.Body)
	}
	// A socket client that sends a bearer anyway is not refused for it.
	rec = httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/status", nil)
	req.Header.Set("Authorization", "Bearer whatever")
	NewServer(newRecordingBackend(), WithWebAuth(NewWebAuth("http://x", ""))).ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("socket server with a page, bearer sent: %d %s", rec.Code, rec.Body)
	}
}

func TestTranscriptEndpoint(t *testing.T) {
	b := newRecordingBackend()
	b.transcript = Transcript{Entries: []json.RawMessage{json.RawMessage(`{"type":"message","id":"a1"}`)}, Truncated: true}
	c := client(t, serve(t, b, DefaultAddr(shortDir(t))))
	got, err := c.Transcript(t.Context(), "i/1", 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 1 || string(got.Entries[0]) != `{"type":"message","id":"a1"}` || !got.Truncated {
		t.Errorf("transcript %+v", got)
	}
	if _, err := c.Transcript(t.Context(), "i-2", 0); err != nil {
		t.Fatal(err)
	}
	if calls := b.Calls(); calls != "Transcript i/1 50\nTranscript i-2 200" {
		t.Errorf("calls:\n%s", calls)
	}
	for _, limit := range []string{"0", "-1", "x", "5001"} {
		rec := httptest.NewRecorder()
		NewServer(b).ServeHTTP(rec, httptest.NewRequest("GET", "/v1/instances/i-1/transcript?limit="+limit, nil))
		if rec.Code != 400 {
			t.Errorf("limit %s: %d, want 400", limit, rec.Code)
		}
	}
}
