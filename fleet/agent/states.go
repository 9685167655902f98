package agent

import "example.com/pifleet/fleet/agent/internal/worker"

// WorkerTable is the lifecycle of one worker process under the agent
// (machine name "worker"): starting, idle, running, stopping and how it
// ends. Its state names are the ones the agent reports for an instance.
// docs/state-machines.md prints it beside the server's tables.
var WorkerTable = worker.WorkerTable
