// Package adminapi is the agent's admin API as both sides see it: the
// paths, the JSON types the agent encodes and the CLI decodes, and Client,
// which calls a running agent over its root-only unix socket.
//
// The API is JSON over HTTP on a unix socket (--admin-socket). Its paths
// are versioned (/v1/...); its field names are read by scripts through
// `nodecache <command> -o json`, so a field is renamed only with a new
// version.
//
// NewHandler is the server: it parses and checks each request's
// parameters, answers 400 to bad ones, and asks an Agent, which the
// running agent (internal/agent) implements with typed values. The tail
// stream stays with the agent (Agent.ServeTail).
//
// The package has no config and no metrics.
package adminapi
