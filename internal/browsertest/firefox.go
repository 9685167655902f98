package browsertest

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/internal/syncbuf"
)

// EnvFirefox names the Firefox binary when it is not on PATH.
const EnvFirefox = "PIFLEET_FIREFOX"

// FirefoxSkipMessage is the reason a Firefox test is skipped.
const FirefoxSkipMessage = "no firefox found: install it (apt-get install -y firefox-esr) or set PIFLEET_FIREFOX"

// FindFirefox returns Firefox's path, skipping the test (failing it under
// CI) when there is none.
func FindFirefox(t testing.TB) string {
	t.Helper()
	return findBrowser(t, EnvFirefox, FirefoxSkipMessage, "firefox", "firefox-esr")
}

// firefoxPrefs keep a test's Firefox to itself: no updates, telemetry,
// remote settings, safe browsing or captive-portal checks, so that it
// talks to the page under test on loopback and to nothing else. (Firefox
// sets more of the same itself when it is driven remotely.)
const firefoxPrefs = `user_pref("app.normandy.enabled", false);
user_pref("app.normandy.api_url", "");
user_pref("app.update.disabledForTesting", true);
user_pref("browser.newtabpage.enabled", false);
user_pref("browser.safebrowsing.malware.enabled", false);
user_pref("browser.safebrowsing.phishing.enabled", false);
user_pref("browser.safebrowsing.downloads.enabled", false);
user_pref("browser.safebrowsing.blockedURIs.enabled", false);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("browser.startup.page", 0);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("datareporting.healthreport.uploadEnabled", false);
user_pref("extensions.update.enabled", false);
user_pref("media.gmp-manager.updateEnabled", false);
user_pref("network.captive-portal-service.enabled", false);
user_pref("network.connectivity-service.enabled", false);
user_pref("services.settings.server", "http://127.0.0.1:9/");
user_pref("toolkit.telemetry.server", "");
`

// Firefox is a headless Firefox driven over WebDriver BiDi, with one
// tab. It records, from the start, what a page reports as wrong: uncaught
// exceptions, console errors and Content-Security-Policy violations
// (Firefox reports a blocked script, style or connection as an error of
// the page).
type Firefox struct {
	t       testing.TB
	cmd     *exec.Cmd
	exited  chan struct{}
	stderr  *syncbuf.Buffer
	conn    *bidi
	context string // the tab's browsing context id

	mu       sync.Mutex
	problems []string
	more     chan struct{} // closed, and replaced, when a problem is added
}

// firefoxStart bounds Firefox's startup and the first commands: on a
// machine loaded by a whole test suite, answering the first command has
// taken over a minute. It never paces a test.
const firefoxStart = 3 * time.Minute

// listening is the line Firefox prints once its BiDi server is up.
var listening = regexp.MustCompile(`WebDriver BiDi listening on (ws://\S+)`)

// NewFirefox starts a fresh headless Firefox (its own profile in a
// temporary directory) with a window of o's size. It ends with the test.
func NewFirefox(t testing.TB, o Options) *Firefox {
	t.Helper()
	path := FindFirefox(t)
	if o.Width == 0 {
		o.Width, o.Height = 1400, 900
	}
	profile := t.TempDir()
	if err := os.WriteFile(filepath.Join(profile, "user.js"), []byte(firefoxPrefs), 0o644); err != nil {
		t.Fatal(err)
	}
	// Port 0: Firefox picks a free one and prints it.
	cmd := exec.Command(path, "--headless", "--no-remote", "--profile", profile, "--remote-debugging-port=0", "about:blank")
	cmd.Env = append(os.Environ(), "MOZ_CRASHREPORTER_DISABLE=1", "MOZ_CRASHREPORTER_SHUTDOWN=1")
	// Its own process group, so that its content processes end with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	f := &Firefox{t: t, cmd: cmd, exited: make(chan struct{}), stderr: &syncbuf.Buffer{}, more: make(chan struct{})}
	url := make(chan string, 1)
	go func() {
		// The address, then the rest of the output for a failing test.
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			f.stderr.Write([]byte(line))
			if m := listening.FindStringSubmatch(line); m != nil {
				url <- m[1]
				break
			}
			if err != nil {
				break
			}
		}
		_, _ = io.Copy(f.stderr, r)
		_ = cmd.Wait()
		close(f.exited)
	}()
	t.Cleanup(f.quit)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), firefoxStart)
	defer cancel()
	var ws string
	select {
	case ws = <-url:
	case <-f.exited:
		t.Fatalf("firefox exited before it listened:\n%s", f.stderr.String())
	case <-ctx.Done():
		t.Fatalf("firefox did not listen within %v:\n%s", firefoxStart, f.stderr.String())
	}
	if f.conn, err = dialBiDi(ctx, ws+"/session", f.event); err != nil {
		t.Fatalf("connect to firefox at %s: %v", ws, err)
	}
	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	for _, c := range []struct {
		method      string
		params, out any
	}{
		// A confirm() is answered OK, as the person at the page would to go on.
		{"session.new", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
			"unhandledPromptBehavior": map[string]string{"default": "accept"}}}}, nil},
		{"session.subscribe", map[string]any{"events": []string{"log.entryAdded"}}, nil},
		{"browsingContext.getTree", map[string]any{"maxDepth": 0}, &tree},
	} {
		if err := f.conn.call(ctx, c.method, c.params, c.out); err != nil {
			t.Fatalf("start a firefox session (%v after the start): %v\n%s", time.Since(start).Round(time.Second), err, f.Output())
		}
	}
	if len(tree.Contexts) == 0 {
		t.Fatalf("firefox has no tab:\n%s", f.Output())
	}
	f.context = tree.Contexts[0].Context
	if err := f.SetViewport(o.Width, o.Height); err != nil {
		t.Fatal(err)
	}
	return f
}

// event records what the page reports as wrong.
func (f *Firefox) event(method string, params json.RawMessage) {
	if method != "log.entryAdded" {
		return
	}
	var e struct {
		Type  string `json:"type"`
		Level string `json:"level"`
		Text  string `json:"text"`
	}
	if json.Unmarshal(params, &e) != nil || e.Level != "error" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problems = append(f.problems, e.Type+": "+e.Text)
	close(f.more)
	f.more = make(chan struct{})
}

// Problems are the uncaught exceptions, console errors and
// Content-Security-Policy violations of every page so far.
func (f *Firefox) Problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.problems...)
}

// AwaitProblems waits, at most d, until ok accepts the problems so far
// (they arrive as events, after the page reported them), and returns
// them.
func (f *Firefox) AwaitProblems(d time.Duration, ok func([]string) bool) ([]string, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		p, more := append([]string(nil), f.problems...), f.more
		f.mu.Unlock()
		if ok(p) {
			return p, nil
		}
		select {
		case <-more:
		case <-deadline.C:
			return p, fmt.Errorf("problems %q: %w (%v)", p, ErrNotYet, d)
		}
	}
}

// FailOnProblems fails the test, when it ends, for every problem a page
// reported (Problems).
func (f *Firefox) FailOnProblems() {
	f.t.Cleanup(func() {
		// Everything the browser sent before this round trip is recorded.
		_ = f.call(10*time.Second, "browsingContext.getTree", map[string]any{"maxDepth": 0}, nil)
		for _, p := range f.Problems() {
			f.t.Errorf("firefox: the page reported %s", p)
		}
	})
}

// quit closes the browser, and kills what is left of it.
func (f *Firefox) quit() {
	if f.conn != nil {
		_ = f.call(10*time.Second, "browser.close", nil, nil)
		f.conn.close()
	}
	select {
	case <-f.exited:
	case <-time.After(20 * time.Second):
		f.t.Logf("firefox did not close; killing it")
	}
	_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
	<-f.exited
}

func (f *Firefox) call(d time.Duration, method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return f.conn.call(ctx, method, params, result)
}

// step bounds one command of a test; it never paces it.
const firefoxStep = 60 * time.Second

// SetViewport sets the size of the tab's page, at twice the pixel density
// (as a phone has).
func (f *Firefox) SetViewport(width, height int) error {
	return f.call(firefoxStep, "browsingContext.setViewport", map[string]any{"context": f.context,
		"viewport": map[string]int{"width": width, "height": height}, "devicePixelRatio": 2}, nil)
}

// Navigate loads url (following redirects) and waits until it has loaded.
func (f *Firefox) Navigate(url string) error {
	return f.call(firefoxStep, "browsingContext.navigate", map[string]any{"context": f.context, "url": url, "wait": "complete"}, nil)
}

// remoteValue is a value the browser returns from script (its
// serialization of a JavaScript value).
type remoteValue struct {
	Type     string          `json:"type"`
	Value    json.RawMessage `json:"value"`
	SharedID string          `json:"sharedId"`
}

// evaluate runs a JavaScript expression in the page within d and returns
// its value, awaiting a promise.
func (f *Firefox) evaluate(d time.Duration, expr string) (remoteValue, error) {
	var r struct {
		Type             string      `json:"type"`
		Result           remoteValue `json:"result"`
		ExceptionDetails struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	err := f.call(d, "script.evaluate", map[string]any{"expression": expr, "target": map[string]string{"context": f.context},
		"awaitPromise": true, "resultOwnership": "none", "serializationOptions": map[string]any{"maxDomDepth": 0}}, &r)
	if err != nil {
		return remoteValue{}, err
	}
	if r.Type == "exception" {
		return remoteValue{}, fmt.Errorf("script threw: %s", r.ExceptionDetails.Text)
	}
	return r.Result, nil
}

// Eval evaluates a JavaScript expression in the page within d and decodes
// its value (as JSON) into out.
func (f *Firefox) Eval(d time.Duration, expr string, out any) error {
	v, err := f.evaluate(d, `Promise.resolve().then(() => (`+expr+`)).then((v) => JSON.stringify(v === undefined ? null : v))`)
	if err != nil {
		return fmt.Errorf("%s: %w", expr, err)
	}
	var s string
	if v.Type != "string" || json.Unmarshal(v.Value, &s) != nil {
		return fmt.Errorf("%s: a %s, not JSON text", expr, v.Type)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal([]byte(s), out)
}

// ErrNotYet is an Until whose expression stayed falsy.
var ErrNotYet = errors.New("not within the time allowed")

// Until waits, at most d, until the JavaScript expression is truthy in
// the page (checked at once and on every change of the DOM or of the
// address's #fragment), and decodes its value into out.
func (f *Firefox) Until(d time.Duration, expr string, out any) error {
	wait := `new Promise((resolve) => {
		const value = () => { try { return (` + expr + `) } catch (e) { return undefined } };
		let obs;
		const check = () => { const v = value(); if (v) { finish({v}) } };
		const finish = (r) => { obs.disconnect(); removeEventListener('hashchange', check); clearTimeout(timer); resolve(r) };
		obs = new MutationObserver(check);
		obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
		addEventListener('hashchange', check);
		const timer = setTimeout(() => finish({late: true, v: value()}), ` + fmt.Sprint(d.Milliseconds()) + `);
		check();
	})`
	var r struct {
		Late bool            `json:"late"`
		V    json.RawMessage `json:"v"`
	}
	if err := f.Eval(d+firefoxStep, wait, &r); err != nil {
		return err
	}
	if r.Late {
		return fmt.Errorf("%s: %w (%v; last value %s)", expr, ErrNotYet, d, r.V)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.V, out)
}

// Click clicks, with the mouse, the middle of the element the CSS
// selector finds, scrolled into view first. It fails when the element is
// missing or another one covers that point: what a person could not
// click either.
func (f *Firefox) Click(selector string) error {
	sel, _ := json.Marshal(selector)
	v, err := f.evaluate(firefoxStep, `(() => {
		const e = document.querySelector(`+string(sel)+`);
		if (!e) return 'missing';
		e.scrollIntoView({block: 'center', inline: 'center'});
		const r = e.getBoundingClientRect();
		if (r.width === 0 || r.height === 0) return 'not shown';
		const x = r.left + r.width / 2, y = r.top + r.height / 2;
		if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) return 'outside the window';
		const hit = document.elementFromPoint(x, y);
		if (hit !== e && !e.contains(hit)) return 'covered by ' + (hit ? hit.outerHTML.slice(0, 80) : 'nothing');
		return e })()`)
	if err != nil {
		return fmt.Errorf("click %s: %w", selector, err)
	}
	if v.Type != "node" {
		var why string
		_ = json.Unmarshal(v.Value, &why)
		return fmt.Errorf("click %s: %s", selector, why)
	}
	return f.call(firefoxStep, "input.performActions", map[string]any{"context": f.context, "actions": []any{
		map[string]any{"type": "pointer", "id": "mouse", "parameters": map[string]string{"pointerType": "mouse"}, "actions": []any{
			map[string]any{"type": "pointerMove", "x": 0, "y": 0, "origin": map[string]any{"type": "element", "element": map[string]string{"sharedId": v.SharedID}}},
			map[string]any{"type": "pointerDown", "button": 0},
			map[string]any{"type": "pointerUp", "button": 0},
		}},
	}}, nil)
}

// Type clicks the element the CSS selector finds and types text into it,
// key by key.
func (f *Firefox) Type(selector, text string) error {
	if err := f.Click(selector); err != nil {
		return err
	}
	var keys []any
	for _, r := range text {
		keys = append(keys, map[string]string{"type": "keyDown", "value": string(r)}, map[string]string{"type": "keyUp", "value": string(r)})
	}
	return f.call(firefoxStep, "input.performActions", map[string]any{"context": f.context, "actions": []any{
		map[string]any{"type": "key", "id": "keyboard", "actions": keys},
	}}, nil)
}

// Shot saves what the window shows as NAME.png when EnvScreenshots is
// set, as Shot does for Chromium.
func (f *Firefox) Shot(name string) {
	f.t.Helper()
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		return
	}
	if err := f.Eval(firefoxStep, `(() => { document.getElementById('toasts')?.replaceChildren(); window.scrollTo(0, 0) })()`, nil); err != nil {
		f.t.Fatalf("screenshot %s: %v", name, err)
	}
	var r struct {
		Data string `json:"data"`
	}
	if err := f.call(firefoxStep, "browsingContext.captureScreenshot", map[string]any{"context": f.context}, &r); err != nil {
		f.t.Fatalf("screenshot %s: %v", name, err)
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		f.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// Output is what Firefox printed, for a failing test's message.
func (f *Firefox) Output() string {
	return strings.TrimSpace(f.stderr.String())
}
