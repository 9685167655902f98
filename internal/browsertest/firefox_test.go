package browsertest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// probePage is a page under a strict Content-Security-Policy that breaks
// it twice (an inline script, and a script that throws), and has a form
// to click and type into.
const probePage = `<!doctype html><meta charset="utf-8"><title>probe</title>
<script>document.title = "inline ran"</script>
<script src="/app.js"></script>
<p id="out">waiting</p><input id="name"><button id="go">Go</button><button id="ask">Ask</button>`

const probeScript = `document.addEventListener('DOMContentLoaded', () => {
	document.getElementById('go').addEventListener('click', () => {
		setTimeout(() => { document.getElementById('out').textContent = 'hello ' + document.getElementById('name').value }, 50);
	});
	document.getElementById('ask').addEventListener('click', () => {
		document.getElementById('out').textContent = confirm('Go on?') ? 'confirmed' : 'dismissed';
	});
	setTimeout(() => { throw new Error('broken on purpose') }, 0);
});`

func serveProbe(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'")
		if r.URL.Path == "/app.js" {
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write([]byte(probeScript))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(probePage))
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// TestFirefoxDrivesAPageAndHearsItsProblems: the kit's Firefox loads a
// page, clicks and types with mouse and keys, waits for a change, and
// reports the blocked inline script and the exception.
func TestFirefoxDrivesAPageAndHearsItsProblems(t *testing.T) {
	url := serveProbe(t)
	f := NewFirefox(t, Options{Width: 390, Height: 844})
	if err := f.Navigate(url); err != nil {
		t.Fatal(err)
	}
	var width int
	if err := f.Eval(10*time.Second, `innerWidth`, &width); err != nil || width != 390 {
		t.Errorf("innerWidth %d (%v), want 390", width, err)
	}
	var title string
	if err := f.Eval(10*time.Second, `document.title`, &title); err != nil || title != "probe" {
		t.Errorf("title %q (%v): the inline script ran despite the policy", title, err)
	}
	if err := f.Type("#name", "ana <b>"); err != nil {
		t.Fatal(err)
	}
	if err := f.Click("#go"); err != nil {
		t.Fatal(err)
	}
	var out string
	if err := f.Until(10*time.Second, `document.getElementById('out').textContent.startsWith('hello') && document.getElementById('out').textContent`, &out); err != nil || out != "hello ana <b>" {
		t.Errorf("after typing and clicking: %q (%v)", out, err)
	}
	// A confirm() is answered OK.
	if err := f.Click("#ask"); err != nil {
		t.Fatal(err)
	}
	if err := f.Until(10*time.Second, `document.getElementById('out').textContent === 'confirmed'`, nil); err != nil {
		t.Errorf("confirm: %v", err)
	}
	// A condition that never holds ends with ErrNotYet.
	if err := f.Until(200*time.Millisecond, `document.getElementById('nothing')`, nil); !errors.Is(err, ErrNotYet) {
		t.Errorf("Until of what never comes: %v, want ErrNotYet", err)
	}
	if err := f.Click("#nothing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("click on a missing element: %v", err)
	}
	var evalErr error = f.Eval(10*time.Second, `nope()`, nil)
	if evalErr == nil || !strings.Contains(evalErr.Error(), "nope") {
		t.Errorf("Eval of a throwing expression: %v", evalErr)
	}

	has := func(p []string, what string) bool {
		for _, s := range p {
			if strings.Contains(s, what) {
				return true
			}
		}
		return false
	}
	if _, err := f.AwaitProblems(10*time.Second, func(p []string) bool {
		return has(p, "Content-Security-Policy: The page’s settings blocked an inline script") && has(p, "broken on purpose")
	}); err != nil {
		t.Errorf("want the blocked inline script and the exception: %v", err)
	}
}

// FuzzParseBiDi: any message from the browser decodes or fails with
// ErrBadBiDiMessage.
func FuzzParseBiDi(f *testing.F) {
	for _, s := range []string{
		`{"type":"success","id":1,"result":{}}`,
		`{"type":"error","id":2,"error":"no such frame","message":"x"}`,
		`{"type":"error","id":null,"error":"invalid argument","message":"x"}`,
		`{"type":"event","method":"log.entryAdded","params":{"level":"error","text":"t"}}`,
		`{"type":"event"}`, `{"type":"success"}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseBiDi(data)
		if err != nil {
			if !errors.Is(err, ErrBadBiDiMessage) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		switch m.Type {
		case "success":
			if m.ID == nil {
				t.Fatal("a success without an id")
			}
		case "error":
		case "event":
			if m.Method == "" {
				t.Fatal("an event without a method")
			}
		default:
			t.Fatalf("type %q accepted", m.Type)
		}
	})
}
