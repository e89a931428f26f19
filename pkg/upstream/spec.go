package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/resolvconf"
)

// The grammar of --upstream and --stub-domain, parsed here and nowhere else:
//
//	servers = PATH | server ("," server)*
//	server  = IP | IP:PORT | [IPv6] | [IPv6]:PORT | tls://IP[:PORT][#NAME]
//	stub    = DOMAIN "=" server ("," server)* option*
//	option  = policy=P | force-tcp | prefer-udp | timeout=D | max-concurrent=N
//	        | max-ttl=D | max-negative-ttl=D
//
// PATH is a resolv.conf (a spec with a '/' and no "://"); its nameserver
// lines are the servers. The port is 53, or 853 after tls://; NAME is the
// name the server's certificate must carry, by default its IP.

const (
	defaultPort = 53
	tlsPort     = 853 // DNS over TLS (RFC 7858)
)

// ServerList is a parsed server list: the addresses in order, and for those
// reached over DNS over TLS the name each certificate must carry.
type ServerList struct {
	Addrs []netip.AddrPort
	// TLSNames maps each tls:// server of Addrs to its name; nil when none.
	TLSNames map[netip.AddrPort]string
}

// ParseServers parses an --upstream spec: a resolv.conf path, or a comma
// list of servers ("1.1.1.1,[2606:4700::1111]:53,tls://9.9.9.9#dns.quad9.net").
func ParseServers(spec string) (ServerList, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return ServerList{}, errors.New("empty upstream spec; want IP[:port],... or a resolv.conf path")
	}
	if strings.ContainsRune(spec, '/') && !strings.Contains(spec, "://") {
		addrs, err := parseResolvConf(spec)
		return ServerList{Addrs: addrs}, err
	}
	l, err := parseServerList(spec)
	if err != nil {
		return ServerList{}, fmt.Errorf("parsing upstream list %q: %w", spec, err)
	}
	return l, nil
}

// parseServerList parses a comma list of servers (no path).
func parseServerList(list string) (ServerList, error) {
	var l ServerList
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		rest, isTLS := strings.CutPrefix(item, "tls://")
		if !isTLS {
			ap, err := parseAddrPort(item)
			if err != nil {
				return ServerList{}, err
			}
			l.Addrs = append(l.Addrs, ap)
			continue
		}
		ap, name, err := parseTLSServer(rest)
		if err != nil {
			return ServerList{}, fmt.Errorf("%q: %w", item, err)
		}
		if l.TLSNames == nil {
			l.TLSNames = map[netip.AddrPort]string{}
		}
		l.Addrs = append(l.Addrs, ap)
		l.TLSNames[ap] = name
	}
	return l, nil
}

// parseAddrPort parses "IP", "IP:port", "[IPv6]:port", "[IPv6]" or a bare
// IPv6, port 53 by default.
func parseAddrPort(s string) (netip.AddrPort, error) {
	if s == "" {
		return netip.AddrPort{}, errors.New("empty server address")
	}
	if strings.Contains(s, "/") {
		return netip.AddrPort{}, fmt.Errorf("server %q: a resolv.conf path must be the whole spec, not one item of a list", s)
	}
	ap, ok := parseHostPort(s, defaultPort)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("server %q is not IP[:port] (IPv6 with a port as [::1]:53; a resolv.conf path must contain a '/')", s)
	}
	return checkAddrPort(s, ap)
}

// parseHostPort parses "IP", "[IP]", "IP:port" or "[IPv6]:port", with port
// def when none is given; the address is unmapped.
func parseHostPort(s string, def uint16) (netip.AddrPort, bool) {
	if addr, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(addr.Unmap(), def), true
	}
	if inner, ok := strings.CutPrefix(s, "["); ok && strings.HasSuffix(inner, "]") {
		if addr, err := netip.ParseAddr(strings.TrimSuffix(inner, "]")); err == nil {
			return netip.AddrPortFrom(addr.Unmap(), def), true
		}
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

// parseTLSServer parses what follows tls://: "IP[:port][#NAME]", port 853
// by default, NAME the IP by default.
func parseTLSServer(s string) (netip.AddrPort, string, error) {
	const want = "want tls://IP[:port][#SERVER-NAME], e.g. tls://9.9.9.9#dns.quad9.net"
	hostport, name, _ := strings.Cut(s, "#")
	ap, ok := parseHostPort(hostport, tlsPort)
	if !ok {
		return netip.AddrPort{}, "", errors.New(want)
	}
	if _, err := checkAddrPort(hostport, ap); err != nil {
		return netip.AddrPort{}, "", err
	}
	if name == "" {
		return ap, ap.Addr().WithZone("").String(), nil
	}
	if !isHostName(name) {
		return netip.AddrPort{}, "", fmt.Errorf("server name %q is not a host name; %s", name, want)
	}
	return ap, name, nil
}

// isHostName says whether name is a host name a certificate can carry:
// dot-separated labels of letters, digits, '-' and '_'.
func isHostName(name string) bool {
	if _, ok := dns.IsDomainName(name); !ok || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if label == "" || strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return false
		}
	}
	return true
}

func checkAddrPort(s string, ap netip.AddrPort) (netip.AddrPort, error) {
	switch {
	case ap.Port() == 0:
		return netip.AddrPort{}, fmt.Errorf("server %q has port 0", s)
	case ap.Addr().IsUnspecified():
		return netip.AddrPort{}, fmt.Errorf("server %q is an unspecified address", s)
	case ap.Addr().IsMulticast():
		return netip.AddrPort{}, fmt.Errorf("server %q is a multicast address", s)
	}
	return ap, nil
}

// parseResolvConf returns the nameserver lines of a resolv.conf file.
func parseResolvConf(path string) ([]netip.AddrPort, error) {
	rc, err := resolvconf.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading resolv.conf: %w", err)
	}
	out := make([]netip.AddrPort, 0, len(rc.Nameservers))
	for _, ns := range rc.Nameservers {
		addr, err := netip.ParseAddr(ns.Addr)
		if err != nil {
			return nil, fmt.Errorf("parsing %s line %d: nameserver %q is not an IP: %w", path, ns.Line, ns.Addr, err)
		}
		ap, err := checkAddrPort(ns.Addr, netip.AddrPortFrom(addr.Unmap(), defaultPort))
		if err != nil {
			return nil, fmt.Errorf("parsing %s line %d: %w", path, ns.Line, err)
		}
		out = append(out, ap)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nameserver lines in %s", path)
	}
	return out, nil
}

// TLSConfigs is Config.TLS for the servers names lists: each verified
// against its name with roots (nil: the system's CAs).
func TLSConfigs(names map[netip.AddrPort]string, roots *x509.CertPool) map[netip.AddrPort]*tls.Config {
	if len(names) == 0 {
		return nil
	}
	out := make(map[netip.AddrPort]*tls.Config, len(names))
	for ap, name := range names {
		out[ap] = &tls.Config{ServerName: name, RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return out
}

// Stub is one parsed --stub-domain.
type Stub struct {
	Domain  string // lowercased FQDN
	Servers ServerList
	Options StubOptions
	// MaxTTL and MaxNegativeTTL cap the cached TTLs of answers under
	// Domain (max-ttl=, max-negative-ttl=); zero: the cache-wide caps. The
	// Forwarder does not read them: they are the cache's.
	MaxTTL, MaxNegativeTTL time.Duration
}

// ParseStub parses "DOMAIN=SERVER,... [OPTION...]" (the grammar above).
func ParseStub(spec string) (Stub, error) {
	fields := strings.Fields(spec)
	if len(fields) == 0 {
		return Stub{}, errors.New("empty stub domain; want DOMAIN=IP[:port],... [options]")
	}
	domain, list, ok := strings.Cut(fields[0], "=")
	if !ok {
		return Stub{}, fmt.Errorf("stub domain %q: want domain=IP[:port][,IP[:port]] [options]", fields[0])
	}
	var s Stub
	var err error
	if s.Domain, err = canonicalDomain(domain); err != nil {
		return Stub{}, fmt.Errorf("stub domain %q: %w", domain, err)
	}
	if list == "" {
		return Stub{}, fmt.Errorf("stub domain %q: no servers after '='", domain)
	}
	if s.Servers, err = parseServerList(list); err != nil {
		return Stub{}, fmt.Errorf("stub domain %q: %w", domain, err)
	}
	for _, w := range fields[1:] {
		if err := s.option(w); err != nil {
			return Stub{}, fmt.Errorf("stub domain %q: %w", domain, err)
		}
	}
	return s, nil
}

// option sets one stub domain option, w being KEY or KEY=VALUE.
func (s *Stub) option(w string) error {
	k, v, hasValue := strings.Cut(w, "=")
	switch {
	case k == "force-tcp" && !hasValue:
		s.Options.ForceTCP = true
	case k == "prefer-udp" && !hasValue: // the default, accepted for clarity
	case k == "policy" && hasValue:
		s.Options.Policy = Policy(v)
		return s.Options.Policy.Validate()
	case k == "timeout" && hasValue:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("timeout=%s: want a positive duration such as 2s", v)
		}
		s.Options.TryTimeout = d
	case k == "max-concurrent" && hasValue:
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("max-concurrent=%s: want a positive number", v)
		}
		s.Options.MaxInFlight = n
	case (k == "max-ttl" || k == "max-negative-ttl") && hasValue:
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return fmt.Errorf("%s: want a duration of at least 1s, e.g. 30s", w)
		}
		if k == "max-ttl" {
			s.MaxTTL = d
		} else {
			s.MaxNegativeTTL = d
		}
	default:
		return fmt.Errorf("unknown stub domain option %q (want policy=, force-tcp, prefer-udp, timeout=, max-concurrent=, max-ttl=, max-negative-ttl=)", w)
	}
	return nil
}

// canonicalDomain lowercases and qualifies a domain name and rejects the
// root and malformed names.
func canonicalDomain(domain string) (string, error) {
	domain = strings.ToLower(strings.TrimSpace(domain))
	if domain == "" || domain == "." {
		return "", errors.New("domain must not be empty or the root")
	}
	if _, ok := dns.IsDomainName(domain); !ok || strings.HasPrefix(domain, ".") {
		return "", fmt.Errorf("%q is not a domain name", domain)
	}
	return dns.Fqdn(domain), nil
}
