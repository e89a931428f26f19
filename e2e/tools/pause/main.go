// Command pause is the e2e node's pod sandbox image: it waits for SIGTERM or
// SIGINT and exits 0. No registry is reachable from the rig, so the rig
// builds this instead of pulling registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
