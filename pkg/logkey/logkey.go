// Package logkey names the slog attribute keys that more than one package
// logs, so that one field means one key across the agent's log lines.
// Keys used in one place stay literal where they are logged.
package logkey

const (
	// Err carries an error.
	Err = "err"
	// Component names the part of the agent that logged (cache, server, ...);
	// set once per component with slog.Logger.With.
	Component = "component"
	// Addr is a socket address: a listener, or where output is sent.
	Addr = "addr"
	// Panic carries a recovered panic value.
	Panic = "panic"
	// Stack carries the goroutine stack of a recovered panic.
	Stack = "stack"
	// Generation is the config or zone generation a line is about.
	Generation = "generation"
)
