// Package piextension ships pifleet.ts, the pi extension that lets a pi
// (0.73.1) orchestrate the fleet: loaded with `pi -e pifleet.ts` (no build
// step) or installed into ~/.pi/agent/extensions by `pifleet-server
// pi-extension --install`, it fetches the running pifleet-server's tool
// catalogue (GET /v1/tools) and registers every tool as a pi tool whose
// calls go to POST /v1/tools/{name}, and it follows GET /v1/wakes,
// injecting each wake (a durable task_done, an escalation) into the
// conversation as a message that triggers a turn, once per wake.
//
// It finds the server as the pifleet-server commands do: PIFLEET_API
// (default the unix socket ~/.pi/agent/fleet/server/control.sock) and, for
// a TCP address, the bearer token in PIFLEET_API_TOKEN_FILE.
package piextension
