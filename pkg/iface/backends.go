package iface

import (
	"errors"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Family is an IP address family; it selects iptables or ip6tables.
type Family uint8

// The two families a Manager handles.
const (
	FamilyV4 Family = 4
	FamilyV6 Family = 6
)

// String returns "ipv4" or "ipv6".
func (f Family) String() string {
	if f == FamilyV6 {
		return "ipv6"
	}
	return "ipv4"
}

func familyOf(ip netip.Addr) Family {
	if ip.Is4() {
		return FamilyV4
	}
	return FamilyV6
}

// ErrLinkKindUnsupported is returned (wrapped) by LinkHandle.LinkAdd when the kernel does not know the
// link kind, e.g. a kernel built without the dummy driver.
var ErrLinkKindUnsupported = errors.New("link kind not supported by the kernel")

// LinkHandle is the part of rtnetlink the Manager uses. The real one wraps a netlink.Handle.
type LinkHandle interface {
	// LinkByName returns the link called name, or nil and no error when there is none.
	LinkByName(name string) (netlink.Link, error)
	// LinkAdd creates link; an unknown kind gives an error wrapping ErrLinkKindUnsupported.
	LinkAdd(link netlink.Link) error
	LinkSetUp(link netlink.Link) error
	// LinkSetAlias sets the link's alias (IFLA_IFALIAS).
	LinkSetAlias(link netlink.Link, alias string) error
	// LinkSetName renames a link that is down.
	LinkSetName(link netlink.Link, name string) error
	LinkDel(link netlink.Link) error
	// AddrList returns the addresses of link in both families.
	AddrList(link netlink.Link) ([]netlink.Addr, error)
	AddrReplace(link netlink.Link, addr *netlink.Addr) error
	AddrDel(link netlink.Link, addr *netlink.Addr) error
	// Watch sends on the returned channel (capacity 1, coalescing) after any link or address change,
	// until done is closed; the channel is closed once every watcher goroutine has stopped, which also
	// happens early if the subscription fails.
	Watch(done <-chan struct{}) (<-chan struct{}, error)
}

// RuleHandle is the part of iptables/ip6tables the Manager uses. Rule specs are in the form
// `iptables -S` prints them, without the leading "-A <chain>".
type RuleHandle interface {
	// Backend names the flavour in use: ModeNFT or ModeLegacy.
	Backend() IPTablesMode
	// ListRules returns the rules of chain in order; exists is false when the chain is absent.
	ListRules(fam Family, table, chain string) (rules []string, exists bool, err error)
	// ReplaceChain creates chain if absent, flushes it and appends rules in order.
	ReplaceChain(fam Family, table, chain string, rules [][]string) error
	// EditChain applies edits to chain in order as one atomic commit: all of them or, when one
	// fails (a rule to delete is gone), none. Rules are named by spec, never by position, so
	// another writer changing the chain meanwhile cannot make it delete a rule that is not ours.
	EditChain(fam Family, table, chain string, edits []RuleEdit) error
	// DeleteChain flushes and deletes chain; an absent chain is not an error.
	DeleteChain(fam Family, table, chain string) error
}

// RuleEdit is one change EditChain makes: with At zero, delete the first rule equal to Spec
// (iptables -D chain spec); with At n > 0, insert Spec at position n (iptables -I chain n spec).
type RuleEdit struct {
	At   int
	Spec []string
}

// deleteEdits returns n deletions of spec.
func deleteEdits(spec []string, n int) []RuleEdit {
	out := make([]RuleEdit, n)
	for i := range out {
		out[i] = RuleEdit{Spec: spec}
	}
	return out
}
