package iface

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Defaults applied to zero fields of Config.
const (
	DefaultInterfaceName = "nodelocaldns"
	DefaultPort          = 53
	DefaultSyncInterval  = 10 * time.Second
)

// IPTablesMode names an iptables flavour: the binaries (iptables-nft or
// iptables-legacy) the rules are written with. The zero value means ModeAuto.
type IPTablesMode string

// IPTables flavours accepted in Config.IPTablesMode.
const (
	// ModeAuto picks the flavour that holds kube-proxy's rules (see chooseMode).
	ModeAuto IPTablesMode = "auto"
	// ModeNFT writes through iptables-nft (the nf_tables kernel API).
	ModeNFT IPTablesMode = "nft"
	// ModeLegacy writes through iptables-legacy (the x_tables kernel API).
	ModeLegacy IPTablesMode = "legacy"
)

// ParseIPTablesMode returns the flavour named s; "" is the zero value (ModeAuto).
func ParseIPTablesMode(s string) (IPTablesMode, error) {
	m := IPTablesMode(s)
	return m, m.Validate()
}

// MarshalText and UnmarshalText let a flag set or a config file hold an
// IPTablesMode; an unknown name is refused when it is read.
func (m IPTablesMode) MarshalText() ([]byte, error) { return []byte(m), nil }

// UnmarshalText sets m from its name; see MarshalText.
func (m *IPTablesMode) UnmarshalText(b []byte) error {
	v, err := ParseIPTablesMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Validate reports whether m is a known flavour or the zero value.
func (m IPTablesMode) Validate() error {
	switch m {
	case "", ModeAuto, ModeNFT, ModeLegacy:
		return nil
	}
	return fmt.Errorf("iface: iptables mode %q, want auto, nft or legacy", string(m))
}

// IsFlavour reports whether m names one flavour's binaries (nft or
// legacy), not ModeAuto nor the zero value.
func (m IPTablesMode) IsFlavour() bool { return m == ModeNFT || m == ModeLegacy }

// maxIfNameLen is IFNAMSIZ-1, the longest interface name Linux accepts.
const maxIfNameLen = 15

// Config describes the interface and the iptables rules the Manager keeps in place.
type Config struct {
	// InterfaceName is the link that carries LocalIPs. Zero value: "nodelocaldns".
	InterfaceName string
	// LocalIPs are the addresses the agent listens on (the link-local IP, optionally the kube-dns
	// ClusterIP). Required; v4 and v6 may be mixed. IPv4-mapped IPv6 addresses are rejected.
	LocalIPs []netip.Addr
	// Port is the DNS port the NOTRACK/ACCEPT rules cover for udp and tcp. Zero value: 53.
	Port uint16
	// ExtraTCPPorts get the same rules as Port but for tcp only (health/metrics when they bind a local
	// IP). Zero value: none.
	ExtraTCPPorts []uint16
	// SetupInterface creates and keeps the link and its addresses. Zero value: false (the part is a no-op).
	SetupInterface bool
	// SetupIPTables installs and keeps the rules. Zero value: false (the part is a no-op).
	SetupIPTables bool
	// IPTablesMode picks the iptables flavour: ModeAuto, ModeNFT or ModeLegacy. Zero value: ModeAuto.
	IPTablesMode IPTablesMode
	// SyncInterval is the period of the full reconcile in Run. Zero value: 10s.
	SyncInterval time.Duration
	// AcceptInterfaces and AcceptSources restrict who the filter INPUT rules
	// let reach the local IPs (see acceptRules): queries must come in on one
	// of these interfaces (iptables -i names; a trailing + is a wildcard)
	// and from one of these prefixes. Zero values: no restriction, every
	// interface and source is accepted. With either set, the node's own
	// queries (in on lo) are accepted too and all others dropped.
	AcceptInterfaces []string
	AcceptSources    []netip.Prefix
}

// Validate reports the first problem with c. Zero values are valid and mean the documented default.
func (c *Config) Validate() error {
	if err := validateIfName(c.InterfaceName); err != nil {
		return err
	}
	if len(c.LocalIPs) == 0 {
		return errors.New("iface: at least one local IP is required")
	}
	for _, ip := range c.LocalIPs {
		switch {
		case !ip.IsValid():
			return errors.New("iface: invalid local IP")
		case ip.Is4In6():
			return fmt.Errorf("iface: local IP %s is IPv4-mapped, give it as IPv4", ip)
		case ip.Zone() != "":
			return fmt.Errorf("iface: local IP %s has a zone", ip)
		case ip.IsUnspecified(), ip.IsMulticast():
			return fmt.Errorf("iface: local IP %s is not a unicast address", ip)
		case ip.IsLoopback() && (c.SetupInterface || c.SetupIPTables):
			// Serving on loopback is fine (make run); putting loopback on our
			// link, or NOTRACK rules for it, is not.
			return fmt.Errorf("iface: local IP %s is a loopback address: run with --setup-interface=false --setup-iptables=false", ip)
		}
	}
	if slices.Contains(c.ExtraTCPPorts, 0) {
		return errors.New("iface: extra TCP port 0 is not a port")
	}
	if err := c.IPTablesMode.Validate(); err != nil {
		return err
	}
	if err := c.ValidateAccept(); err != nil {
		return err
	}
	if c.SyncInterval < 0 {
		return fmt.Errorf("iface: sync interval %v is negative", c.SyncInterval)
	}
	return nil
}

func validateIfName(name string) error {
	if len(name) > maxIfNameLen {
		return fmt.Errorf("iface: interface name %q is longer than %d bytes", name, maxIfNameLen)
	}
	if name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n") {
		return fmt.Errorf("iface: interface name %q is not a valid Linux link name", name)
	}
	return nil
}

// withDefaults returns a copy of c with zero values replaced and lists deduplicated and sorted.
func (c Config) withDefaults() Config {
	if c.InterfaceName == "" {
		c.InterfaceName = DefaultInterfaceName
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.IPTablesMode == "" {
		c.IPTablesMode = ModeAuto
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	ips := slices.Clone(c.LocalIPs)
	slices.SortFunc(ips, func(a, b netip.Addr) int { return a.Compare(b) })
	c.LocalIPs = slices.Compact(ips)
	ports := slices.Clone(c.ExtraTCPPorts)
	slices.Sort(ports)
	c.ExtraTCPPorts = slices.DeleteFunc(slices.Compact(ports), func(p uint16) bool { return p == c.Port })
	return c
}

// families returns the address families present in c.LocalIPs, v4 first.
func (c Config) families() []Family {
	var out []Family
	if slices.ContainsFunc(c.LocalIPs, netip.Addr.Is4) {
		out = append(out, FamilyV4)
	}
	if slices.ContainsFunc(c.LocalIPs, netip.Addr.Is6) {
		out = append(out, FamilyV6)
	}
	return out
}

// staleFamilies are the families without local IPs: a predecessor run with
// another --local-ip may have left our chains there.
func (c Config) staleFamilies() []Family {
	var out []Family
	for _, fam := range []Family{FamilyV4, FamilyV6} {
		if !slices.Contains(c.families(), fam) {
			out = append(out, fam)
		}
	}
	return out
}

// ipsOf returns the local IPs of family fam.
func (c Config) ipsOf(fam Family) []netip.Addr {
	var out []netip.Addr
	for _, ip := range c.LocalIPs {
		if familyOf(ip) == fam {
			out = append(out, ip)
		}
	}
	return out
}
