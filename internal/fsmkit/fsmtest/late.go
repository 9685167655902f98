package fsmtest

// LateInput is the whole list of stale events that a driver may refuse
// without failing a test run: network input (a frame, or a report that a
// frame caused) that can arrive after the state it was meant for ended.
// Every other refused event is a driver bug: it fired an event where its
// table says it cannot happen, and the table or the driver is wrong.
//
// Keep it short; each entry says how the input comes late.
var LateInput = []Late{
	// Dialer: the two documented departures from the seed (dialer.Table).
	// The application reports connections and losses; a report the dialer
	// already knows of is a duplicate.
	{Machine: "dialer", Event: "lostNormal", State: "NeedsDial",
		Reason: "a loss reported twice, or reported for the dialer's own failed dial"},
	{Machine: "dialer", Event: "lostNormal", State: "Dialing",
		Reason: "a loss reported while the redial already runs"},
	{Machine: "dialer", Event: "connectedExternally", State: "Connected",
		Reason: "the dialer's own connection, reported back by the application"},

	// Session registry: an agent's session reports and the server's
	// catch-up reads race with the loss of the connection they came on.
	{Machine: "session-registry", Event: "incrementalReport", State: "stale_projection",
		Reason: "an incremental report sent before the connection was lost, or ahead of the full report"},
	{Machine: "session-registry", Event: "pageReceived", State: "stale_projection",
		Reason: "a page of a full report whose connection was lost"},
	{Machine: "session-registry", Event: "reattach", State: "stale_projection",
		Reason: "a catch-up that starts as the connection it would read over is lost (it runs again after the next full report)"},
	{Machine: "session-registry", Event: "caughtUp", State: "stale_projection",
		Reason: "a catch-up read cut short by a lost connection (it runs again after the next full report)"},
}
