package iface

import (
	"fmt"
	"net/netip"
	"slices"
)

// IPVSLinkName is the link kube-proxy's IPVS mode puts every Service IP on. IPVS takes packets to
// those IPs in the kernel's local-in path, past any NOTRACK rule, and sends them to the Service's
// endpoints: a local IP on this link is one the agent cannot intercept.
const IPVSLinkName = "kube-ipvs0"

// ipvsHeld returns the local IPs that IPVSLinkName carries, in --local-ip order; nil when there is
// no such link (kube-proxy is not in IPVS mode) or it holds none of them.
func (m *Manager) ipvsHeld() ([]netip.Addr, error) {
	if m.links == nil || m.cfg.InterfaceName == IPVSLinkName {
		return nil, nil
	}
	l, err := m.links.LinkByName(IPVSLinkName)
	if err != nil || l == nil {
		if err != nil {
			err = fmt.Errorf("looking up link %s: %w", IPVSLinkName, err)
		}
		return nil, err
	}
	addrs, err := m.links.AddrList(l)
	if err != nil {
		return nil, fmt.Errorf("listing addresses of %s: %w", IPVSLinkName, err)
	}
	on := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		if p, ok := addrPrefix(a); ok {
			on[p.Addr()] = true
		}
	}
	var held []netip.Addr
	for _, ip := range m.cfg.LocalIPs {
		if on[ip] {
			held = append(held, ip)
		}
	}
	return held, nil
}

// noteIPVSLocked records what ipvsHeld found in st, the gauge and the log: one warning when the
// set of held IPs becomes non-empty or changes, one info line when it empties. It changes nothing
// else: the agent keeps serving (and stays ready) on every local IP, since the link-local one
// still works. Caller holds applyMu.
func (m *Manager) noteIPVSLocked(st *InterfaceStatus) error {
	held, err := m.ipvsHeld()
	if err != nil {
		return err
	}
	st.IPVSHeld = held
	m.met.ipvsHeld.Set(float64(len(held)))
	if slices.Equal(held, m.ipvsLogged) {
		return nil
	}
	if len(held) > 0 {
		m.log.Warn("kube-proxy in IPVS mode holds local IPs on its link: queries to them go to the Service's "+
			"endpoints, not to this agent; point pods at an IP it does not hold (kubelet clusterDNS) and drop these from --local-ip",
			"link", IPVSLinkName, "addresses", fmt.Sprint(held))
	} else {
		m.log.Info("kube-ipvs0 no longer holds any local IP", "link", IPVSLinkName)
	}
	m.ipvsLogged = held
	return nil
}
