// Package webui is pifleet-server's web page: one live page that shows the
// agents, a card per worker with its state, the state machine it moves
// through, its transcript, the tasks that wait for review with their diff,
// and the actions (spawn, prompt, steer, abort, stop, accept, reject,
// answer a dialog, resume a session, create a baseline).
//
// The page is a client of the control API and nothing more: Handler
// serves the HTML (html/template), the embedded script and style sheet,
// and the login, and passes every /v1/ request to the control API server
// it is given (controlapi.NewServer with WithWebAuth). That server is
// where the browser session, the CSRF token and the machines' trust
// policies are enforced, exactly as for the command line; the page adds
// rendering only. It lives beside the control API, not in the command,
// so that any program that serves the API can serve the page too.
//
// Safe by default: the login is a one-time link (controlapi.WebAuth) or
// the control token, turned into an HttpOnly, SameSite=Strict cookie;
// every answer carries a strict Content-Security-Policy
// (ContentSecurityPolicy: no inline script or style, nothing from another
// origin); the page's script puts worker output into the page as text
// only; a Host other than the listener's is refused (DNS rebinding).
//
// No build step: the script is plain JavaScript, the state diagrams are
// drawn here in Go, as SVG, from the very tables the code runs on
// (fleet.InstanceTable, transport.ConnectionTable).
package webui
