// Package registry stores published bundles on the server and serves them
// to workers over HTTP, and holds the clients workers fetch them with.
//
// On disk a registry is a directory: <root>/<name>/manifest.json and
// <root>/<name>/files/<manifest path>. Publish turns a source directory
// into such an entry; List and Show read them back.
//
// Server is the HTTP face of a registry root:
//
//	GET /healthz                                   200 {"ok":true,"service":"pi-fleet-registry"}
//	GET /v1/bundles/<name>/manifest                200 the manifest (compact JSON)
//	GET /v1/bundles/<name>/file?path=P&hash=H      200 the bytes of P, if the manifest lists P with hash H
//
// with the TypeScript registry's status codes and {"error": code} bodies. It parses
// each manifest once and keeps it until the file changes on disk (a
// republish), so a cold sync of thousands of files costs the server a map
// lookup and a sendfile per file.
//
// Client is what a worker's sync uses. Open picks the implementation from
// a PI_FLEET_SERVER value: an http(s) URL is an HTTP registry, a file://
// URL or a plain path is a registry directory read directly.
package registry
