//go:build linux

package iface

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// netlinkLinks is the real LinkHandle: rtnetlink in the caller's network namespace.
type netlinkLinks struct {
	h *netlink.Handle // always non-nil
}

var _ LinkHandle = (*netlinkLinks)(nil)

func newNetlinkLinks() (*netlinkLinks, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("opening rtnetlink: %w", err)
	}
	return &netlinkLinks{h: h}, nil
}

func (n *netlinkLinks) LinkByName(name string) (netlink.Link, error) {
	l, err := n.h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil, nil
	}
	return l, err
}

func (n *netlinkLinks) LinkAdd(link netlink.Link) error {
	err := n.h.LinkAdd(link)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w (%s): %w", ErrLinkKindUnsupported, link.Type(), err)
	}
	return err
}

func (n *netlinkLinks) LinkSetUp(link netlink.Link) error { return n.h.LinkSetUp(link) }
func (n *netlinkLinks) LinkSetAlias(link netlink.Link, alias string) error {
	return n.h.LinkSetAlias(link, alias)
}
func (n *netlinkLinks) LinkSetName(link netlink.Link, name string) error {
	return n.h.LinkSetName(link, name)
}

func (n *netlinkLinks) LinkDel(link netlink.Link) error { return n.h.LinkDel(link) }

func (n *netlinkLinks) AddrList(link netlink.Link) ([]netlink.Addr, error) {
	return n.h.AddrList(link, netlink.FAMILY_ALL)
}

func (n *netlinkLinks) AddrReplace(link netlink.Link, addr *netlink.Addr) error {
	return n.h.AddrReplace(link, addr)
}

func (n *netlinkLinks) AddrDel(link netlink.Link, addr *netlink.Addr) error {
	return n.h.AddrDel(link, addr)
}

// Watch subscribes to link and address events. The netlink goroutines stop when their socket is
// closed (inner closed); the forwarder below closes inner when done closes, drains both channels
// until netlink closes them, then closes out.
func (n *netlinkLinks) Watch(done <-chan struct{}) (<-chan struct{}, error) {
	inner := make(chan struct{})
	stop := sync.OnceFunc(func() { close(inner) })
	addrCh := make(chan netlink.AddrUpdate, 16)
	linkCh := make(chan netlink.LinkUpdate, 16)
	if err := netlink.AddrSubscribeWithOptions(addrCh, inner, netlink.AddrSubscribeOptions{}); err != nil {
		stop()
		return nil, fmt.Errorf("subscribing to address events: %w", err)
	}
	if err := netlink.LinkSubscribeWithOptions(linkCh, inner, netlink.LinkSubscribeOptions{}); err != nil {
		stop()
		for range addrCh {
		}
		return nil, fmt.Errorf("subscribing to link events: %w", err)
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for addrCh != nil || linkCh != nil {
			ok := true
			select {
			case <-done:
				stop()
				done = nil
				continue
			case _, ok = <-addrCh:
				if !ok {
					addrCh = nil
				}
			case _, ok = <-linkCh:
				if !ok {
					linkCh = nil
				}
			}
			if !ok {
				stop() // one subscription ended: end the other, the caller resubscribes
				continue
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, nil
}

// Close releases the netlink handle.
func (n *netlinkLinks) Close() error {
	n.h.Close()
	return nil
}
