// Command resolve looks a name up with Go's own resolver (net.Resolver with
// PreferGo, as a CGO_ENABLED=0 binary does anyway) and prints each IPv4
// address on a line. TestTruncatedClients runs it in a pod beside glibc's
// getent and a musl getaddrinfo client; with -wait it only waits for
// SIGTERM, to keep the pod running.
//
//	resolve NAME
//	resolve -wait
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: resolve NAME | resolve -wait")
		os.Exit(2)
	}
	if os.Args[1] == "-wait" {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
		<-c
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := &net.Resolver{PreferGo: true}
	ips, err := r.LookupIP(ctx, "ip4", os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "resolve: %v\n", err)
		os.Exit(1)
	}
	for _, ip := range ips {
		fmt.Println(ip)
	}
}
