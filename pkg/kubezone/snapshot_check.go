package kubezone

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// A snapshot is read back from disk, where anything can have happened to
// it, so every model is checked as strictly as the informers' conversions
// could have produced it (see model.go) before any reaches the zone.

// checkSnapshot reports the first model in data that the informers could
// not have produced.
func checkSnapshot(data *snapshotData) error {
	for i, ns := range data.Namespaces {
		if !isLabel(ns) {
			return fmt.Errorf("namespace %d: %q is not a DNS label", i, ns)
		}
	}
	for i, s := range data.Services {
		if err := checkService(s); err != nil {
			return fmt.Errorf("service %d: %w", i, err)
		}
	}
	for i, s := range data.Slices {
		if err := checkSlice(s); err != nil {
			return fmt.Errorf("endpoint slice %d: %w", i, err)
		}
	}
	for i, p := range data.Pods {
		if err := checkPod(p); err != nil {
			return fmt.Errorf("pod %d: %w", i, err)
		}
	}
	return nil
}

func checkService(s *svcModel) error {
	if s == nil {
		return errors.New("null")
	}
	if !isLabel(s.Namespace) || !isLabel(s.Name) {
		return fmt.Errorf("name %q/%q is not two DNS labels", s.Namespace, s.Name)
	}
	if s.ExternalName != "" {
		if _, ok := dns.IsDomainName(s.ExternalName); !ok || !dns.IsFqdn(s.ExternalName) || lower(s.ExternalName) != s.ExternalName ||
			len(s.ClusterIPs) > 0 || s.Headless || len(s.Ports) > 0 {
			return fmt.Errorf("%s: external name %q is not a lowercased FQDN alone", s.key(), s.ExternalName)
		}
	}
	if len(s.ClusterIPs) > 2 {
		return fmt.Errorf("%s: %d cluster IPs, want at most 2", s.key(), len(s.ClusterIPs))
	}
	if err := checkAddrs(s.ClusterIPs); err != nil {
		return fmt.Errorf("%s: %w", s.key(), err)
	}
	return checkPorts(s.key(), s.Ports)
}

func checkSlice(s *sliceModel) error {
	if s == nil {
		return errors.New("null")
	}
	if !isLabel(s.Namespace) || !isLabel(s.Service) || !isSubdomain(s.Name) {
		return fmt.Errorf("names %q/%q of service %q are not DNS names", s.Namespace, s.Name, s.Service)
	}
	for i := range s.Endpoints.len() {
		ep := s.Endpoints.at(i)
		if err := checkAddrs([]netip.Addr{ep.Addr}); err != nil {
			return fmt.Errorf("%s: %w", s.key(), err)
		}
		if ep.Hostname != "" && !isLabel(ep.Hostname) {
			return fmt.Errorf("%s: endpoint host name %q is not a DNS label", s.key(), ep.Hostname)
		}
	}
	return checkPorts(s.key(), s.Ports)
}

func checkPod(p *podModel) error {
	if p == nil {
		return errors.New("null")
	}
	if !isLabel(lower(p.Namespace)) || !isSubdomain(lower(p.Name)) {
		return fmt.Errorf("name %q/%q is not a DNS name", p.Namespace, p.Name)
	}
	if len(p.IPs) > 2 {
		return fmt.Errorf("%s: %d IPs, want at most 2", p.key(), len(p.IPs))
	}
	if err := checkAddrs(p.IPs); err != nil {
		return fmt.Errorf("%s: %w", p.key(), err)
	}
	return nil
}

func checkAddrs(addrs []netip.Addr) error {
	for _, a := range addrs {
		if !a.IsValid() || a.Is4In6() || a.Zone() != "" || a.IsUnspecified() {
			return fmt.Errorf("address %v is not a plain unicast address", a)
		}
	}
	return nil
}

func checkPorts(key string, ports []portModel) error {
	for _, p := range ports {
		if p.Port == 0 || (p.Name != "" && !isLabel(p.Name)) {
			return fmt.Errorf("%s: port %q %d is not a named port", key, p.Name, p.Port)
		}
		switch p.Protocol {
		case "tcp", "udp", "sctp":
		default:
			return fmt.Errorf("%s: port protocol %q, want tcp, udp or sctp", key, p.Protocol)
		}
	}
	return nil
}

// isLabel reports a lowercased DNS label (RFC 1123): 1 to 63 of a-z, 0-9
// and '-', not starting or ending with '-'.
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// isSubdomain reports a lowercased DNS subdomain (RFC 1123): labels joined
// by dots, at most 253 characters.
func isSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if !isLabel(s[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

// snapshotAge is how old the snapshot written at w is at now, never negative.
func snapshotAge(w, now time.Time) time.Duration { return max(0, now.Sub(w)) }
