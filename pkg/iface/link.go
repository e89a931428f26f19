package iface

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// ErrForeignLink is returned (wrapped) when a link of the configured name exists that nodecache did
// not create (see ownLink); it is neither adopted, changed nor deleted.
var ErrForeignLink = errors.New("a link nodecache did not create has the interface name")

// linkAlias marks the links nodecache creates (IFLA_IFALIAS, `ip link` shows "alias nodecache").
// An alias survives the agent (a successor or `nodecache cleanup` sees it after a SIGKILL), any link
// kind carries one, and CNI plugins and other agents leave it unset or set their own.
const linkAlias = "nodecache"

// ifaFNoDAD is IFA_F_NODAD: skip duplicate address detection for our v6 addresses.
const ifaFNoDAD = 0x02

// linkView is what inspectLink saw.
type linkView struct {
	link  netlink.Link // nil when absent
	st    InterfaceStatus
	stale []netlink.Addr // non-link-local addresses on our link that are not desired
	mark  bool           // ours but not marked yet (made by a version before the alias): set it
}

func adoptable(kind string) bool { return kind == "dummy" || kind == "bridge" }

// ownLink decides whether l, of kind dummy or bridge, is nodecache's: it carries our alias, or,
// made by a version that set none, it has no alias and its only addresses (link-local v6 aside)
// are host prefixes, at least one of them a local IP. A CNI bridge (cni0, a /24 gateway), a link
// with someone else's alias, or an empty unmarked link is not ours. mark reports an unmarked one.
func ownLink(l netlink.Link, addrs []netlink.Addr, want map[netip.Addr]bool) (ours, mark bool) {
	switch l.Attrs().Alias {
	case linkAlias:
		return true, false
	case "":
	default:
		return false, false
	}
	desired := false
	for _, a := range addrs {
		p, ok := addrPrefix(a)
		switch {
		case !ok:
		case p.Addr().Is6() && p.Addr().IsLinkLocalUnicast():
		case p.Bits() != p.Addr().BitLen():
			return false, false
		case want[p.Addr()]:
			desired = true
		}
	}
	return desired, desired
}

// addrPrefix returns the address of a as a netip.Prefix, unmapped.
func addrPrefix(a netlink.Addr) (netip.Prefix, bool) {
	if a.IPNet == nil {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := a.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones), true
}

// desiredAddr is the netlink form of a local IP: a host prefix, NODAD for v6.
func desiredAddr(ip netip.Addr) *netlink.Addr {
	bits := ip.BitLen()
	a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(ip.AsSlice()), Mask: net.CIDRMask(bits, bits)}}
	if ip.Is6() {
		a.Flags = ifaFNoDAD
	}
	return a
}

// inspectLink reads the link and its addresses without changing anything.
func (m *Manager) inspectLink() (linkView, error) {
	name := m.cfg.InterfaceName
	v := linkView{st: InterfaceStatus{State: StateUnknown, Name: name}}
	l, err := m.links.LinkByName(name)
	if err != nil {
		return v, fmt.Errorf("looking up link %s: %w", name, err)
	}
	if l == nil {
		v.st.State = StateDrift
		v.st.Missing = append(v.st.Missing, m.cfg.LocalIPs...)
		return v, nil
	}
	v.st.Present, v.st.Kind, v.st.Up = true, l.Type(), l.Attrs().Flags&net.FlagUp != 0
	if !adoptable(v.st.Kind) {
		return v, fmt.Errorf("link %s has kind %s, want dummy or bridge: %w", name, v.st.Kind, ErrForeignLink)
	}
	addrs, err := m.links.AddrList(l)
	if err != nil {
		return v, fmt.Errorf("listing addresses of %s: %w", name, err)
	}
	want := make(map[netip.Addr]bool, len(m.cfg.LocalIPs))
	for _, ip := range m.cfg.LocalIPs {
		want[ip] = true
	}
	ours, mark := ownLink(l, addrs, want)
	if !ours {
		return v, fmt.Errorf("link %s (kind %s, alias %q) was not created by nodecache: refusing to adopt, "+
			"change or delete it; give another --interface-name, or delete the link if it is a leftover: %w",
			name, v.st.Kind, l.Attrs().Alias, ErrForeignLink)
	}
	v.link, v.mark = l, mark
	have := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		p, ok := addrPrefix(a)
		switch {
		case !ok || p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() && !want[p.Addr()]:
			// the kernel's own fe80::/64 on a bridge; not ours to manage
		case want[p.Addr()] && p.Bits() == p.Addr().BitLen():
			have[p.Addr()] = true
		default:
			v.stale = append(v.stale, a)
		}
	}
	for _, ip := range m.cfg.LocalIPs {
		if have[ip] {
			v.st.Addresses = append(v.st.Addresses, ip)
		} else {
			v.st.Missing = append(v.st.Missing, ip)
		}
	}
	v.st.State = StateOK
	if !v.st.Up || len(v.st.Missing) > 0 || len(v.stale) > 0 || v.mark {
		v.st.State = StateDrift
	}
	return v, nil
}

// syncLink creates or adopts the link, sets it up and converges its addresses. Caller holds applyMu.
func (m *Manager) syncLink() (InterfaceStatus, error) {
	v, err := m.inspectLink()
	if err != nil {
		m.countCheckErr(kindLink, err)
		return v.st, err
	}
	if v.st.State == StateOK {
		return v.st, nil
	}
	if v.link == nil {
		if v.link, err = m.createLink(); err != nil {
			m.countErr(kindLink, err)
			return v.st, err
		}
		m.countReadd(kindLink, 1)
	}
	if v.mark {
		if err := m.links.LinkSetAlias(v.link, linkAlias); err != nil {
			m.countErr(kindLink, err)
			return v.st, fmt.Errorf("marking link %s as nodecache's: %w", m.cfg.InterfaceName, err)
		}
		m.log.Info("marked a link left by an earlier version as nodecache's", "interface", m.cfg.InterfaceName)
	}
	if v.link.Attrs().Flags&net.FlagUp == 0 {
		if err := m.links.LinkSetUp(v.link); err != nil {
			m.countErr(kindLink, err)
			return v.st, fmt.Errorf("setting link %s up: %w", m.cfg.InterfaceName, err)
		}
	}
	var errs []error
	for _, ip := range v.st.Missing {
		if err := m.links.AddrReplace(v.link, desiredAddr(ip)); err != nil {
			m.countErr(kindAddress, err)
			errs = append(errs, fmt.Errorf("adding %s to %s: %w", ip, m.cfg.InterfaceName, err))
			continue
		}
		m.countReadd(kindAddress, 1)
	}
	for _, a := range v.stale {
		m.log.Info("removing stale address", "interface", m.cfg.InterfaceName, "address", a.IPNet.String())
		if err := m.links.AddrDel(v.link, &a); err != nil {
			m.countErr(kindAddress, err)
			errs = append(errs, fmt.Errorf("removing stale %s from %s: %w", a.IPNet, m.cfg.InterfaceName, err))
		}
	}
	after, err := m.inspectLink()
	if err != nil {
		m.countCheckErr(kindLink, err)
		errs = append(errs, err)
	}
	return after.st, errors.Join(errs...)
}

// tempLinkName is the name a new link is created under. The kernel ignores
// an alias given with the request that creates a link, so the link is
// marked under this name first and renamed after: the configured name never
// shows an unmarked link, even to a successor after a crash in between.
func tempLinkName(name string) string {
	t := "nct-" + name
	return t[:min(len(t), maxIfNameLen)]
}

// createLink adds a dummy link, or an empty bridge when the kernel has no dummy driver (warning
// once), under tempLinkName, marks it and gives it the configured name.
func (m *Manager) createLink() (netlink.Link, error) {
	name, tmp := m.cfg.InterfaceName, tempLinkName(m.cfg.InterfaceName)
	if err := m.removeTempLink(); err != nil {
		return nil, err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = tmp
	if !m.dummyUnsupported {
		err := m.links.LinkAdd(&netlink.Dummy{LinkAttrs: attrs})
		switch {
		case err == nil:
			return m.finishCreated(tmp)
		case !errors.Is(err, ErrLinkKindUnsupported):
			return nil, fmt.Errorf("adding dummy link %s: %w", tmp, err)
		}
		m.dummyUnsupported = true
		m.log.Warn("kernel has no dummy link driver, using an empty bridge instead",
			"interface", name, logkey.Err, err)
	}
	// Without multicast snooping the bridge joins no multicast router
	// group, so the kernel sends no IGMP reports from the local IPs (which
	// would show up as conntrack entries); a dummy link sends none either.
	snooping := false
	if err := m.links.LinkAdd(&netlink.Bridge{LinkAttrs: attrs, MulticastSnooping: &snooping}); err != nil {
		return nil, fmt.Errorf("adding bridge link %s: %w", tmp, err)
	}
	return m.finishCreated(tmp)
}

// finishCreated marks the link just added as tmp and renames it to the configured name; on failure
// it deletes it again.
func (m *Manager) finishCreated(tmp string) (netlink.Link, error) {
	name := m.cfg.InterfaceName
	l, err := m.links.LinkByName(tmp)
	if err == nil && l == nil {
		err = errors.New("not found after adding it")
	}
	if err != nil {
		return nil, fmt.Errorf("looking up new link %s: %w", tmp, err)
	}
	if err = m.links.LinkSetAlias(l, linkAlias); err == nil {
		err = m.links.LinkSetName(l, name)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("marking new link %s and naming it %s: %w", tmp, name, err), m.links.LinkDel(l))
	}
	l, err = m.links.LinkByName(name)
	if err == nil && l == nil {
		err = errors.New("not found after renaming it")
	}
	if err != nil {
		return nil, fmt.Errorf("looking up new link %s: %w", name, err)
	}
	return l, nil
}

// removeTempLink deletes a link left under tempLinkName by a crash during createLink: a dummy or
// bridge without addresses (link-local v6 aside). Anything else there is not ours to delete.
func (m *Manager) removeTempLink() error {
	tmp := tempLinkName(m.cfg.InterfaceName)
	l, err := m.links.LinkByName(tmp)
	if err != nil || l == nil {
		return err
	}
	addrs, err := m.links.AddrList(l)
	if err != nil {
		return fmt.Errorf("listing addresses of %s: %w", tmp, err)
	}
	for _, a := range addrs {
		if p, ok := addrPrefix(a); ok && (!p.Addr().Is6() || !p.Addr().IsLinkLocalUnicast()) {
			return fmt.Errorf("link %s, the name nodecache creates its link under, carries %s: %w", tmp, p, ErrForeignLink)
		}
	}
	if !adoptable(l.Type()) || l.Attrs().Alias != "" && l.Attrs().Alias != linkAlias {
		return fmt.Errorf("link %s, the name nodecache creates its link under, has kind %s and alias %q: %w",
			tmp, l.Type(), l.Attrs().Alias, ErrForeignLink)
	}
	m.log.Info("removing a link left half-created by a crash", "interface", tmp)
	if err := m.links.LinkDel(l); err != nil {
		return fmt.Errorf("deleting leftover link %s: %w", tmp, err)
	}
	return nil
}

// teardownLink removes our addresses, then the link. A foreign link is left alone.
func (m *Manager) teardownLink(ctx context.Context) error {
	if err := m.removeTempLink(); err != nil {
		return err
	}
	v, err := m.inspectLink()
	if err != nil || v.link == nil {
		return err
	}
	var errs []error
	for _, ip := range v.st.Addresses {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := m.links.AddrDel(v.link, desiredAddr(ip)); err != nil {
			errs = append(errs, fmt.Errorf("removing %s from %s: %w", ip, m.cfg.InterfaceName, err))
		}
	}
	if err := m.links.LinkDel(v.link); err != nil {
		errs = append(errs, fmt.Errorf("deleting link %s: %w", m.cfg.InterfaceName, err))
	}
	return errors.Join(errs...)
}
