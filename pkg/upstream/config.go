package upstream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Policy orders the servers of a set for each query. The zero value takes
// the default (PolicyRandom for Config, Config.Policy for a stub domain).
type Policy string

// Forwarding policies accepted in Config.Policy and StubOptions.Policy.
const (
	// PolicySequential tries the servers in the configured order.
	PolicySequential Policy = "sequential"
	// PolicyRandom tries the servers in a fresh random order per query.
	PolicyRandom Policy = "random"
	// PolicyRoundRobin rotates the first server tried by one per query.
	PolicyRoundRobin Policy = "round_robin"
)

// ParsePolicy returns the policy named s; "" is the zero value (the default).
func ParsePolicy(s string) (Policy, error) {
	p := Policy(s)
	return p, p.Validate()
}

// Validate reports an unknown policy, naming the valid ones.
func (p Policy) Validate() error {
	switch p {
	case "", PolicySequential, PolicyRandom, PolicyRoundRobin:
		return nil
	}
	return fmt.Errorf("unknown policy %q (want %s)", string(p), policyNames)
}

const policyNames = "sequential, random or round_robin"

// Defaults applied by New to zero-valued Config fields.
const (
	DefaultTryTimeout     = 2 * time.Second
	DefaultDeadline       = 5 * time.Second
	DefaultMaxInFlight    = 1000
	DefaultFailThreshold  = 3
	DefaultProbeInterval  = time.Second
	DefaultTCPIdleTimeout = 10 * time.Second
	DefaultTCPMaxIdle     = 8
)

// Tap sees each query sent to an upstream and its reply (nil when none
// came). It must not block, and must copy what it keeps.
type Tap interface {
	TapForwarder(upstream netip.AddrPort, tcp bool, query, reply []byte, sent, received time.Time)
}

// Config configures a Forwarder. The zero value of every field but Servers
// selects the documented default.
type Config struct {
	// Servers are the default upstream resolvers. Required, non-empty.
	Servers []netip.AddrPort
	// Tap, when not nil, sees every attempt (dnstap): health probes not
	// included. Nil means none.
	Tap Tap
	// StubDomains maps a lowercased FQDN ("corp.example.") to its own
	// resolvers. A query goes to the stub whose domain is the longest suffix
	// of its name (on label boundaries). Nil means no stub domains.
	StubDomains map[string][]netip.AddrPort
	// StubOptions are per stub domain settings (policy, TCP only, try
	// timeout, in-flight cap), keyed like StubDomains; every key must be a
	// stub domain. Nil means none.
	StubOptions map[string]StubOptions
	// ForceTCP sends every query to the default servers over TCP (pooled
	// connections), never UDP, and probes them over TCP when down:
	// CoreDNS forward's force_tcp. False: UDP first, TCP after a truncated
	// reply, whatever protocol the client used (prefer_udp). Stub domains
	// have their own (StubOptions.ForceTCP); this does not reach them.
	ForceTCP bool
	// Policy orders the servers of a set: PolicySequential, PolicyRandom
	// ("" selects it) or PolicyRoundRobin.
	Policy Policy
	// TryTimeout bounds one attempt at one server (UDP, plus the TCP retry
	// after a truncated reply). Zero means DefaultTryTimeout.
	TryTimeout time.Duration
	// Deadline bounds a whole Exchange across servers and retries; the
	// caller's context may shorten it. Zero means DefaultDeadline.
	Deadline time.Duration
	// MaxInFlight caps concurrent Exchange calls; beyond it Exchange returns
	// ErrOverloaded at once. Zero means DefaultMaxInFlight.
	MaxInFlight int
	// FailThreshold is the number of consecutive failed attempts after
	// which a server is marked down and probed. Zero means
	// DefaultFailThreshold.
	FailThreshold int
	// ProbeInterval is the first wait between health probes of a down
	// server; it doubles after each failed probe, up to 30 times itself.
	// Zero means DefaultProbeInterval.
	ProbeInterval time.Duration
	// TCPIdleTimeout closes pooled TCP connections idle for longer. Zero
	// means DefaultTCPIdleTimeout.
	TCPIdleTimeout time.Duration
	// TCPMaxIdle bounds the idle TCP connections kept per server. Zero
	// means DefaultTCPMaxIdle.
	TCPMaxIdle int
	// TLS lists the servers (of Servers or of stub domains) reached over
	// DNS over TLS (RFC 7858) instead of UDP and TCP, with the TLS config
	// to verify each: ServerName must be set; RootCAs nil means the
	// system's. Queries go over pooled TLS connections, reused like TCP
	// ones; health probes use TLS too. Nil means none.
	TLS map[netip.AddrPort]*tls.Config
	// LocalAddrs are the agent's own listeners (for example
	// 169.254.20.10:53). An upstream equal to one of them, or a loopback
	// upstream on the port of an unspecified listener (0.0.0.0:53), is
	// refused as a forwarding loop. Nil disables the check.
	LocalAddrs []netip.AddrPort

	// udpMaxUses overrides the udpMaxUses bound, for the benchmark that
	// measures it; zero means the constant.
	udpMaxUses int
}

// Validate reports the first problem with c, without changing it.
func (c *Config) Validate() error {
	if len(c.Servers) == 0 {
		return errors.New("no upstream servers configured; set --upstream")
	}
	if err := c.checkServers("upstream", c.Servers); err != nil {
		return err
	}
	for _, domain := range sortedDomains(c.StubDomains) {
		if err := checkStubDomain(domain); err != nil {
			return err
		}
		servers := c.StubDomains[domain]
		if len(servers) == 0 {
			return fmt.Errorf("stub domain %s has no servers", domain)
		}
		if err := c.checkServers("stub domain "+domain+" server", servers); err != nil {
			return err
		}
	}
	for domain, o := range c.StubOptions {
		if _, ok := c.StubDomains[domain]; !ok {
			return fmt.Errorf("options for %s, which is not a stub domain", domain)
		}
		if err := o.validate(domain); err != nil {
			return err
		}
	}
	for addr, t := range c.TLS {
		if t == nil || t.ServerName == "" {
			return fmt.Errorf("DNS over TLS server %v has no server name to verify", addr)
		}
	}
	if c.Policy.Validate() != nil {
		return fmt.Errorf("unknown upstream policy %q (want %s)", string(c.Policy), policyNames)
	}
	durations := []struct {
		name string
		d    time.Duration
	}{
		{"try timeout", c.TryTimeout},
		{"deadline", c.Deadline},
		{"probe interval", c.ProbeInterval},
		{"tcp idle timeout", c.TCPIdleTimeout},
	}
	for _, d := range durations {
		if d.d < 0 {
			return fmt.Errorf("upstream %s is negative: %v", d.name, d.d)
		}
	}
	if c.MaxInFlight < 0 || c.FailThreshold < 0 || c.TCPMaxIdle < 0 {
		return fmt.Errorf("upstream limits must not be negative: max in flight %d, fail threshold %d, tcp max idle %d",
			c.MaxInFlight, c.FailThreshold, c.TCPMaxIdle)
	}
	return nil
}

func (c *Config) checkServers(what string, servers []netip.AddrPort) error {
	for _, s := range servers {
		if !s.IsValid() || s.Port() == 0 || s.Addr().IsUnspecified() {
			return fmt.Errorf("%s %v is not a usable IP:port", what, s)
		}
		if c.isLocal(s) {
			return fmt.Errorf("upstream %v is the agent's own address (forwarding loop); set --upstream", s)
		}
	}
	return nil
}

// isLocal reports whether forwarding to s would reach the agent itself.
func (c *Config) isLocal(s netip.AddrPort) bool {
	addr := s.Addr().Unmap().WithZone("")
	for _, l := range c.LocalAddrs {
		if l.Port() != s.Port() {
			continue
		}
		la := l.Addr().Unmap().WithZone("")
		if la == addr {
			return true
		}
		// A wildcard listener receives whatever reaches the host on that
		// port, loopback included; "::" also takes IPv4 on Linux.
		if la.IsUnspecified() && addr.IsLoopback() && (la.Is6() || addr.Is4()) {
			return true
		}
	}
	return false
}

func checkStubDomain(domain string) error {
	if domain == "" || domain == "." {
		return errors.New("stub domain must not be the root; use the default servers")
	}
	if _, ok := dns.IsDomainName(domain); !ok || !dns.IsFqdn(domain) || strings.ToLower(domain) != domain {
		return fmt.Errorf("stub domain %q must be a lowercased FQDN (use ParseStub)", domain)
	}
	return nil
}

// withDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Policy == "" {
		c.Policy = PolicyRandom
	}
	setDuration(&c.TryTimeout, DefaultTryTimeout)
	setDuration(&c.Deadline, DefaultDeadline)
	setDuration(&c.ProbeInterval, DefaultProbeInterval)
	setDuration(&c.TCPIdleTimeout, DefaultTCPIdleTimeout)
	setInt(&c.MaxInFlight, DefaultMaxInFlight)
	setInt(&c.FailThreshold, DefaultFailThreshold)
	setInt(&c.TCPMaxIdle, DefaultTCPMaxIdle)
	return c
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

func setInt(n *int, def int) {
	if *n == 0 {
		*n = def
	}
}

func sortedDomains(m map[string][]netip.AddrPort) []string {
	out := make([]string, 0, len(m))
	for d := range m {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
