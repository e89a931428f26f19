package iface

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
)

// opLog records mutating operations of both fakes, in order.
type opLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *opLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, fmt.Sprintf(format, args...))
}

func (l *opLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops)
}

// fakeLinks is a stateful LinkHandle: links by name, each with its addresses.
type fakeLinks struct {
	ops     *opLog
	noDummy bool // LinkAdd of a dummy fails like a kernel without the driver

	mu       sync.Mutex // guards following
	links    map[string]netlink.Link
	addrs    map[string][]netlink.Addr
	index    int
	watchers map[chan struct{}]bool
	failAdd  error // returned by AddrReplace when set
}

var _ LinkHandle = (*fakeLinks)(nil)

func newFakeLinks(ops *opLog) *fakeLinks {
	return &fakeLinks{ops: ops, links: map[string]netlink.Link{}, addrs: map[string][]netlink.Addr{},
		watchers: map[chan struct{}]bool{}}
}

func (f *fakeLinks) LinkByName(name string) (netlink.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.links[name], nil
}

func (f *fakeLinks) LinkAdd(link netlink.Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := link.Attrs().Name
	if _, ok := f.links[name]; ok {
		return fmt.Errorf("link %s: file exists", name)
	}
	if f.noDummy && link.Type() == "dummy" {
		return fmt.Errorf("%w: operation not supported", ErrLinkKindUnsupported)
	}
	f.index++
	attrs := netlink.LinkAttrs{Name: name, Index: f.index} // like the kernel, ignoring an alias given here
	switch link.Type() {
	case "dummy":
		f.links[name] = &netlink.Dummy{LinkAttrs: attrs}
	case "bridge":
		f.links[name] = &netlink.Bridge{LinkAttrs: attrs}
	default:
		f.links[name] = &netlink.GenericLink{LinkAttrs: attrs, LinkType: link.Type()}
	}
	f.ops.add("link:add %s %s", link.Type(), name)
	return nil
}

func (f *fakeLinks) LinkSetUp(link netlink.Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[link.Attrs().Name]
	if !ok {
		return errors.New("no such device")
	}
	l.Attrs().Flags |= net.FlagUp
	f.ops.add("link:up %s", link.Attrs().Name)
	return nil
}

func (f *fakeLinks) LinkSetAlias(link netlink.Link, alias string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[link.Attrs().Name]
	if !ok {
		return errors.New("no such device")
	}
	l.Attrs().Alias = alias
	f.ops.add("link:alias %s %s", link.Attrs().Name, alias)
	return nil
}

func (f *fakeLinks) LinkSetName(link netlink.Link, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := link.Attrs().Name
	l, ok := f.links[old]
	switch {
	case !ok:
		return errors.New("no such device")
	case f.links[name] != nil:
		return fmt.Errorf("link %s: file exists", name)
	case l.Attrs().Flags&net.FlagUp != 0:
		return errors.New("device or resource busy")
	}
	delete(f.links, old)
	l.Attrs().Name = name
	f.links[name] = l
	f.addrs[name] = f.addrs[old]
	delete(f.addrs, old)
	f.ops.add("link:rename %s %s", old, name)
	return nil
}

// addExisting puts link there as it is (alias included), as someone else or an earlier run left it.
func (f *fakeLinks) addExisting(link netlink.Link) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index++
	link.Attrs().Index = f.index
	f.links[link.Attrs().Name] = link
}

func (f *fakeLinks) LinkDel(link netlink.Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := link.Attrs().Name
	if _, ok := f.links[name]; !ok {
		return errors.New("no such device")
	}
	delete(f.links, name)
	delete(f.addrs, name)
	f.ops.add("link:del %s", name)
	return nil
}

func (f *fakeLinks) AddrList(link netlink.Link) ([]netlink.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[link.Attrs().Name]; !ok {
		return nil, errors.New("no such device")
	}
	return slices.Clone(f.addrs[link.Attrs().Name]), nil
}

func sameAddr(a, b netlink.Addr) bool { return a.IPNet.String() == b.IPNet.String() }

func (f *fakeLinks) AddrReplace(link netlink.Link, addr *netlink.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := link.Attrs().Name
	if _, ok := f.links[name]; !ok {
		return errors.New("no such device")
	}
	if f.failAdd != nil {
		return f.failAdd
	}
	f.addrs[name] = slices.DeleteFunc(f.addrs[name], func(a netlink.Addr) bool { return sameAddr(a, *addr) })
	f.addrs[name] = append(f.addrs[name], *addr)
	f.ops.add("link:addr-replace %s %s", name, addr.IPNet)
	return nil
}

func (f *fakeLinks) AddrDel(link netlink.Link, addr *netlink.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := link.Attrs().Name
	n := len(f.addrs[name])
	f.addrs[name] = slices.DeleteFunc(f.addrs[name], func(a netlink.Addr) bool { return sameAddr(a, *addr) })
	if len(f.addrs[name]) == n {
		return errors.New("cannot assign requested address")
	}
	f.ops.add("link:addr-del %s %s", name, addr.IPNet)
	return nil
}

func (f *fakeLinks) Watch(done <-chan struct{}) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.watchers[ch] = true
	f.mu.Unlock()
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for {
			select {
			case <-done:
				f.mu.Lock()
				delete(f.watchers, ch)
				f.mu.Unlock()
				return
			case <-ch:
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out, nil
}

// notifyLocked wakes every watcher, as the kernel does after a change. Caller holds f.mu.
func (f *fakeLinks) notifyLocked() {
	for ch := range f.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// external changes made by "someone else", with the event the kernel would send.
func (f *fakeLinks) externalAddrDel(name, cidr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs[name] = slices.DeleteFunc(f.addrs[name], func(a netlink.Addr) bool { return a.IPNet.String() == cidr })
	f.notifyLocked()
}

func (f *fakeLinks) externalAddrAdd(name, cidr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ipn, err := net.ParseCIDR(cidr)
	if err != nil {
		panic(err)
	}
	ip, _, _ := net.ParseCIDR(cidr)
	ipn.IP = ip
	f.addrs[name] = append(f.addrs[name], netlink.Addr{IPNet: ipn})
	f.notifyLocked()
}

func (f *fakeLinks) externalLinkDel(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.links, name)
	delete(f.addrs, name)
	f.notifyLocked()
}

func (f *fakeLinks) externalLinkDown(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links[name].Attrs().Flags &^= net.FlagUp
	f.notifyLocked()
}

// addrStrings returns the addresses of name as sorted "ip/bits" strings.
func (f *fakeLinks) addrStrings(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.addrs[name] {
		out = append(out, a.IPNet.String())
	}
	slices.Sort(out)
	return out
}

func (f *fakeLinks) addrFlags(name, cidr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.addrs[name] {
		if a.IPNet.String() == cidr {
			return a.Flags
		}
	}
	return -1
}

func joinLines(lines []string) string { return strings.Join(lines, "\n") }

// newLinkOfKind returns a link as nodecache creates it (with our alias), or, for the other kinds,
// as someone else does.
func newLinkOfKind(kind, name string) netlink.Link {
	attrs := netlink.LinkAttrs{Name: name}
	if adoptable(kind) {
		attrs.Alias = linkAlias
	}
	switch kind {
	case "dummy":
		return &netlink.Dummy{LinkAttrs: attrs}
	case "bridge":
		return &netlink.Bridge{LinkAttrs: attrs}
	}
	return &netlink.GenericLink{LinkAttrs: attrs, LinkType: kind}
}
