package webui_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/fleet/controlapi/webui"
)

// emptyFleet is a Backend with nothing in it.
type emptyFleet struct{ controlapi.Backend }

func (emptyFleet) Status(context.Context) (controlapi.Status, error) { return controlapi.Status{}, nil }

// The page and the control API behind it, as pifleet-server serve --ui
// wires them: a browser without a session gets the login page, and the
// API refuses it.
func Example() {
	auth := controlapi.NewWebAuth("http://127.0.0.1:9791", "the-control-token")
	api := controlapi.NewServer(emptyFleet{}, controlapi.WithToken("the-control-token"), controlapi.WithWebAuth(auth))
	page := webui.New(api, auth, webui.Options{Hosts: webui.LoopbackHosts("127.0.0.1:9791")})

	for _, path := range []string{"/", "/v1/status"} {
		rec := httptest.NewRecorder()
		page.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9791"+path, nil))
		fmt.Println(path, rec.Code)
	}
	// A one-time login (what pifleet-server ui prints) sets the cookie.
	rec := httptest.NewRecorder()
	page.ServeHTTP(rec, httptest.NewRequest("GET", auth.NewLogin().URL, nil))
	fmt.Println("login", rec.Code, rec.Result().Cookies()[0].Name)
	// Output:
	// / 200
	// /v1/status 401
	// login 303 pifleet_session
}
