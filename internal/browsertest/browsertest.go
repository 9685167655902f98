// Package browsertest drives real headless browsers from Go tests: the
// browsers the web page's tests run in. Chromium is driven with chromedp
// (New); Firefox over WebDriver BiDi, the W3C protocol it speaks natively
// (NewFirefox).
//
// The browsers are Debian's chromium and firefox-esr (.ci/run installs
// them), or the ones named by PIFLEET_CHROMIUM and PIFLEET_FIREFOX.
// Without one a test skips with a message, unless CI is set: there a
// missing browser fails the test.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// EnvChromium names the browser binary when it is not on PATH.
const EnvChromium = "PIFLEET_CHROMIUM"

// SkipMessage is the reason a browser test is skipped.
const SkipMessage = "no chromium found: install it (apt-get install -y chromium) or set PIFLEET_CHROMIUM"

// Find returns the browser's path, skipping the test (failing it under CI)
// when there is none.
func Find(t testing.TB) string {
	t.Helper()
	return findBrowser(t, EnvChromium, SkipMessage, "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
}

// findBrowser returns the path named by the environment variable env, or
// else the first of names on PATH; with neither it skips the test with
// skip, or fails it under CI, where every browser test must run.
func findBrowser(t testing.TB, env, skip string, names ...string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal(skip + " (CI is set: browser tests must run)")
	}
	t.Skip(skip)
	return ""
}

// Options tune the browser.
type Options struct {
	// Width and Height are the window's size (default 1400×900).
	Width, Height int
}

// New starts a fresh headless browser (its own profile in a temporary
// directory, no network services of its own) and returns a context of
// its first tab. The browser ends with the test.
func New(t testing.TB, o Options) context.Context {
	t.Helper()
	path := Find(t)
	if o.Width == 0 {
		o.Width, o.Height = 1400, 900
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(o.Width, o.Height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// Start the browser now, so that a broken one fails here.
	if err := chromedp.Do(ctx); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("start %s: %v", path, err)
	}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// Within bounds one step of a test: a broken page fails with a deadline
// instead of hanging. It never paces the test.
func Within(ctx context.Context, d time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Do(c, steps...)
}

// Until waits, at most d, until the JavaScript expression is truthy in the
// page (checked on every change of the DOM), and returns its value.
func Until[T any](ctx context.Context, d time.Duration, expr string) (T, error) {
	c, cancel := context.WithTimeout(ctx, d+time.Second)
	defer cancel()
	return chromedp.Run(c, chromedp.Poll[T](expr, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(d)))
}

// CatchErrors fails the test, when it ends, if the page threw an uncaught
// exception or left a promise rejection unhandled after this call (until
// the next full navigation).
func CatchErrors(t testing.TB, ctx context.Context) {
	t.Helper()
	if _, err := Eval[bool](ctx, 10*time.Second, `(() => { window.__pageErrors = [];
		addEventListener('error', (e) => __pageErrors.push(String(e.error && e.error.stack || e.message)));
		addEventListener('unhandledrejection', (e) => __pageErrors.push(String(e.reason && e.reason.stack || e.reason)));
		return true })()`); err != nil {
		t.Fatalf("install the error catcher: %v", err)
	}
	t.Cleanup(func() {
		errs, err := Eval[[]string](ctx, 10*time.Second, `window.__pageErrors || []`)
		if err != nil {
			return // the page is gone (the test failed or navigated away)
		}
		for _, e := range errs {
			t.Errorf("the page threw: %s", e)
		}
	})
}

// Eval evaluates a JavaScript expression in the page within d and
// decodes its value.
func Eval[T any](ctx context.Context, d time.Duration, expr string) (T, error) {
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Run(c, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// EnvScreenshots names the directory Shot writes to (the screenshots
// under docs/ are made this way); Shot does nothing without it.
const EnvScreenshots = "PIFLEET_SCREENSHOTS"

// Shot saves the whole page as NAME.png, from the top and without the
// page's passing notices (#toasts), when EnvScreenshots is set; with
// viewport, only what the screen shows.
func Shot(t testing.TB, ctx context.Context, name string, viewport bool) {
	t.Helper()
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		return
	}
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(c, chromedp.Evaluate[chromedp.Void](
		`document.getElementById('toasts')?.replaceChildren(); window.scrollTo(0, 0)`)); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	shoot := chromedp.FullScreenshot(100)
	if viewport {
		shoot = chromedp.CaptureScreenshot()
	}
	png, err := chromedp.Run(c, shoot)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
