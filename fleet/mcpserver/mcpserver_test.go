package mcpserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"example.com/pifleet/fleet/controlapi"
)

// Streamable HTTP answers only a client with the control API's token.
func TestHandlerNeedsTheToken(t *testing.T) {
	s := &Server{mcp: mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)}
	h := s.Handler("s3cret")
	for _, auth := range []string{"", "Bearer wrong", "s3cret", "Bearer "} {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d", auth, rec.Code)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == http.StatusUnauthorized {
		t.Errorf("the right token was refused")
	}
	if empty := s.Handler(""); empty != nil {
		rec := httptest.NewRecorder()
		empty.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("an empty token guards nothing: %d", rec.Code)
		}
	}
}

func TestErrorText(t *testing.T) {
	got := ErrorText(&controlapi.Error{Code: controlapi.CodePolicyRefused, Message: "no", Hint: "ask the user"})
	if got != "error policy_refused: no\nhint: ask the user" {
		t.Errorf("%q", got)
	}
}
