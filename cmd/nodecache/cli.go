package main

// cliCommands maps CLI command names to their implementations; each talks to
// the running agent over the admin socket.
var cliCommands = map[string]func(args []string) error{}
