package server

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// The defaults of Config's fields, which the agent's flags use too.
const (
	DefaultMaxTCPConns          = 1000
	DefaultMaxTCPConnsPerClient = 100
	DefaultMaxInFlightPerClient = 100
	DefaultTCPIdleTimeout       = 10 * time.Second
	DefaultTCPPipeline          = 16
	DefaultMaxInFlight          = 2000
)

// Config configures a Server. The zero value of every field but Addrs means
// the documented default.
type Config struct {
	// Addrs are the IP:port pairs to serve on, UDP and TCP. Required.
	Addrs []netip.AddrPort
	// MaxTCPConns caps open TCP connections; beyond it new ones are closed at
	// once. Default 1000.
	MaxTCPConns int
	// MaxTCPConnsPerClient caps one client IP's share of MaxTCPConns, so
	// that one pod cannot take every connection and with them TCP fallback
	// for the node. Default 100, a tenth of the default MaxTCPConns.
	MaxTCPConnsPerClient int
	// TCPIdleTimeout closes a TCP connection with no query for this long.
	// Default 10s (RFC 7766 6.2.3).
	TCPIdleTimeout time.Duration
	// TCPPipeline is how many queries of one TCP connection may be in flight
	// at once. Default 16.
	TCPPipeline int
	// MaxInFlight caps queries on the slow path (cache miss, zone chase)
	// across the server; beyond it queries are answered REFUSED. Default 2000.
	MaxInFlight int
	// MaxInFlightPerClient caps one client IP's share of MaxInFlight, TCP
	// and UDP together; beyond it the client's misses are answered REFUSED
	// while other clients' still get slots. Default 100: it takes 20 pods
	// flooding at once to fill the default MaxInFlight, and 100 in flight
	// still carries 1,000 misses a second at 100 ms of upstream latency.
	MaxInFlightPerClient int
	// QueryTimeout is the deadline for answering one query on the slow path.
	// Default 5s.
	QueryTimeout time.Duration
	// Domain is the cluster domain, e.g. "cluster.local." Default that.
	Domain string
	// StubDomains are the stub domains the upstreams route apart; each is a
	// zone label value of the CoreDNS-compatible metrics. Those below the
	// cluster domain or below in-addr.arpa or ip6.arpa take the names under
	// them from the zone: the most specific zone wins (SetStubDomains
	// changes them live). Default none.
	StubDomains []string
	// MaxUDPSize caps the UDP reply size whatever the client advertises.
	// Default 1232.
	MaxUDPSize int
	// Autopath answers a pod's first search-path query for its whole search
	// path (needs Deps.Pods and a zone). Default off.
	Autopath bool
	// AutopathSearch is the node's own search list, which ClusterFirst pods
	// inherit after the cluster's three. Default none.
	AutopathSearch []string
	// LoadBalance shuffles the A and AAAA records of every NOERROR answer
	// (cluster zone, cache, upstream and local alike), as CoreDNS's
	// loadbalance plugin does, so that clients which take the first address
	// spread over all of them. Default off: answers keep their order.
	LoadBalance bool
	// SuppressAAAA lists the domains whose AAAA queries are answered
	// NOERROR with no records (nodata.go); "." is every name. Default none.
	SuppressAAAA []string
	// ClientQPS, when positive, limits each client IP to this many queries a
	// second (burst ClientBurst); beyond it queries are answered REFUSED.
	// Default 0: no limit.
	ClientQPS float64
	// ClientBurst is the bucket size of the per-client limit. Default
	// ClientQPS (at least 1).
	ClientBurst int
}

func (c *Config) setDefaults() {
	if c.MaxTCPConns == 0 {
		c.MaxTCPConns = DefaultMaxTCPConns
	}
	if c.MaxTCPConnsPerClient == 0 {
		c.MaxTCPConnsPerClient = min(DefaultMaxTCPConnsPerClient, c.MaxTCPConns)
	}
	if c.MaxInFlightPerClient == 0 {
		c.MaxInFlightPerClient = DefaultMaxInFlightPerClient
	}
	if c.TCPIdleTimeout == 0 {
		c.TCPIdleTimeout = DefaultTCPIdleTimeout
	}
	if c.TCPPipeline == 0 {
		c.TCPPipeline = DefaultTCPPipeline
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = 5 * time.Second
	}
	if c.Domain == "" {
		c.Domain = "cluster.local."
	}
	if c.MaxUDPSize == 0 {
		c.MaxUDPSize = 1232
	}
}

// Validate reports the first setting that cannot work, saying what to fix.
func (c *Config) Validate() error {
	if len(c.Addrs) == 0 {
		return errors.New("no listen address: set --local-ip and --port")
	}
	for _, a := range c.Addrs {
		if !a.IsValid() || a.Port() == 0 {
			return fmt.Errorf("listen address %v is not a valid IP:port", a)
		}
	}
	switch {
	case c.MaxTCPConns < 0, c.TCPPipeline < 0, c.MaxInFlight < 0, c.MaxTCPConnsPerClient < 0, c.MaxInFlightPerClient < 0:
		return errors.New("connection and in-flight caps must not be negative")
	case c.TCPIdleTimeout < 0, c.QueryTimeout < 0:
		return errors.New("timeouts must not be negative")
	case c.ClientQPS < 0 || c.ClientBurst < 0:
		return errors.New("per-client query limit must not be negative")
	case c.MaxUDPSize != 0 && (c.MaxUDPSize < 512 || c.MaxUDPSize > 65535):
		return fmt.Errorf("max UDP size %d: want 512 to 65535", c.MaxUDPSize)
	}
	for _, d := range c.SuppressAAAA {
		if _, ok := dns.IsDomainName(d); !ok || d == "" || strings.ContainsAny(d, " ,\\") {
			return fmt.Errorf("--suppress-aaaa %q is not a domain name (\".\" for every name)", d)
		}
	}
	return nil
}
