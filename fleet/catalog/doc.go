// Package catalog is the tool catalogue an orchestrating LLM drives a
// pifleet fleet with: one definition of every tool (its name, a
// description written for a model, the JSON Schema of its input, and its
// handler over the control API's operations), served two ways.
// pifleet-server serves it on its control API (GET /v1/tools, POST
// /v1/tools/{name}, GET /v1/wakes; see controlapi.WithTools), and both
// `pifleet-server mcp` (an MCP server) and the pi extension
// (piextension/pifleet.ts) are thin clients of those endpoints, so they
// offer the very same tools and cannot drift apart.
//
// The tools carry the names of the TypeScript pi-fleet's where they do the
// same job (fleet_status, remote_spawn, remote_prompt, remote_accept, …), so
// a prompt written for pi-fleet works unchanged. What they return is
// bounded (a reply is cut at MaxResultChars), text that came from a worker
// is framed as untrusted data with every line prefixed, errors carry the
// control API's code and a hint the model can act on, and every call ends
// within its timeout. The tools act through the server's fleet, so its trust
// policies hold: a machine trusted only to allow cannot be prompted or
// reviewed through a tool, and no tool changes a trust policy. A task
// escalated to a human is refused by remote_accept and remote_reject: that
// verdict is the human's.
//
// Wakes is the other half: a durable task_done or an escalation becomes a
// Wake, a message for the model that the pi extension injects into the
// conversation (waking the orchestrator) and the MCP server sends as a
// notification.
package catalog
