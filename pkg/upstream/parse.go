package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/resolvconf"
)

const defaultPort = 53

// ParseServers parses an upstream spec: either a comma-separated list of
// IP[:port] ("1.1.1.1,[2606:4700::1111]:53,::1"; IPv6 with a port needs
// brackets) or, when the spec contains a '/', the path of a resolv.conf
// whose nameserver lines are taken in order. The port defaults to 53.
func ParseServers(spec string) ([]netip.AddrPort, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("empty upstream spec; want IP[:port],... or a resolv.conf path")
	}
	if strings.ContainsRune(spec, '/') {
		return parseResolvConf(spec)
	}
	return parseServerList(spec)
}

func parseServerList(list string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, item := range strings.Split(list, ",") {
		ap, err := parseAddrPort(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("parsing upstream list %q: %w", list, err)
		}
		out = append(out, ap)
	}
	return out, nil
}

// parseAddrPort parses "IP", "IP:port", "[IPv6]:port" or a bare IPv6.
func parseAddrPort(s string) (netip.AddrPort, error) {
	if s == "" {
		return netip.AddrPort{}, errors.New("empty server address")
	}
	if addr, err := netip.ParseAddr(s); err == nil {
		return checkAddrPort(s, netip.AddrPortFrom(addr.Unmap(), defaultPort))
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if addr, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return checkAddrPort(s, netip.AddrPortFrom(addr.Unmap(), defaultPort))
		}
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("server %q is not IP[:port] (IPv6 with a port as [::1]:53; a resolv.conf path must contain a '/')", s)
	}
	return checkAddrPort(s, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
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

// ParseStubDomain parses "corp.example=10.0.0.1,10.0.0.2:5353" into the
// lowercased FQDN "corp.example." and its servers.
func ParseStubDomain(spec string) (string, []netip.AddrPort, error) {
	domain, list, ok := strings.Cut(strings.TrimSpace(spec), "=")
	if !ok {
		return "", nil, fmt.Errorf("stub domain %q: want domain=IP[:port][,IP[:port]]", spec)
	}
	domain, err := canonicalDomain(domain)
	if err != nil {
		return "", nil, fmt.Errorf("stub domain %q: %w", spec, err)
	}
	if strings.TrimSpace(list) == "" {
		return "", nil, fmt.Errorf("stub domain %q: no servers after '='", spec)
	}
	servers, err := parseServerList(list)
	if err != nil {
		return "", nil, fmt.Errorf("stub domain %q: %w", spec, err)
	}
	return domain, servers, nil
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

// Files of a kube-dns ConfigMap mounted as a directory.
const (
	kubeDNSStubDomainsFile = "stubDomains"
	kubeDNSUpstreamsFile   = "upstreamNameservers"
)

// LoadKubeDNSConfig reads a kube-dns style ConfigMap mounted as a directory:
// the file stubDomains holds a JSON object domain -> ["IP[:port]", ...] and
// upstreamNameservers a JSON array of "IP[:port]". A missing or blank file
// yields no entries for that part (both missing is not an error); stubs is
// never nil on success, so callers may add to it.
func LoadKubeDNSConfig(dir string) (stubs map[string][]netip.AddrPort, upstreams []netip.AddrPort, err error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("reading kube-dns config dir: %w", err)
	} else if !fi.IsDir() {
		return nil, nil, fmt.Errorf("reading kube-dns config dir: %s is not a directory", dir)
	}
	var rawStubs map[string][]string
	if err := readJSONFile(filepath.Join(dir, kubeDNSStubDomainsFile), &rawStubs); err != nil {
		return nil, nil, err
	}
	var rawUpstreams []string
	if err := readJSONFile(filepath.Join(dir, kubeDNSUpstreamsFile), &rawUpstreams); err != nil {
		return nil, nil, err
	}
	stubs = make(map[string][]netip.AddrPort, len(rawStubs))
	for name, list := range rawStubs {
		domain, err := canonicalDomain(name)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: stub domain %q: %w", kubeDNSStubDomainsFile, name, err)
		}
		servers, err := parseAddrList(list)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: stub domain %q: %w", kubeDNSStubDomainsFile, name, err)
		}
		stubs[domain] = append(stubs[domain], servers...)
	}
	if upstreams, err = parseAddrList(rawUpstreams); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", kubeDNSUpstreamsFile, err)
	}
	return stubs, upstreams, nil
}

func parseAddrList(list []string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, s := range list {
		ap, err := parseAddrPort(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	return out, nil
}

// readJSONFile decodes path into v; a missing or blank file leaves v alone.
func readJSONFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("parsing %s as JSON: %w", path, err)
	}
	return nil
}
