package handover

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// A successor checks an offer before it serves on a single descriptor of
// it: whoever gets to send one could otherwise make the agent read a socket
// of theirs (bound elsewhere, or not a socket at all) and report serving
// addresses it does not serve.

// ipprotoMPTCP is IPPROTO_MPTCP: a listener the Go runtime opened as
// multipath TCP (its default for listeners since Go 1.24) serves TCP clients.
const ipprotoMPTCP = 262

// CheckOffer checks that m is an offer of the addresses want (in any order)
// and that files are what it says: m.UDP UDP sockets, then m.TCP listening
// TCP (or MPTCP) sockets, each bound to an offered address, with at least
// one of each on every address. On error it closes every file.
func CheckOffer(m Msg, files []*os.File, want []string) error {
	err := checkOffer(m, files, want)
	if err != nil {
		CloseFiles(files)
	}
	return err
}

func checkOffer(m Msg, files []*os.File, want []string) error {
	if m.Op != OpOffer || m.UDP < 0 || m.TCP < 0 || len(files) != m.UDP+m.TCP {
		return fmt.Errorf("predecessor's offer is %q with %d descriptors for %d UDP and %d TCP sockets (%s)",
			m.Op, len(files), m.UDP, m.TCP, m.Error)
	}
	if !slices.Equal(slices.Sorted(slices.Values(m.Addrs)), slices.Sorted(slices.Values(want))) {
		return fmt.Errorf("predecessor serves %v, this agent %v", m.Addrs, want)
	}
	offered := map[netip.AddrPort][2]int{} // address → UDP, TCP sockets bound to it
	for _, s := range m.Addrs {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return fmt.Errorf("predecessor's offer names %q: %w", s, err)
		}
		offered[unmap(ap)] = [2]int{}
	}
	for i, f := range files {
		tcp := i >= m.UDP
		ap, err := checkListener(f, tcp)
		if err != nil {
			return fmt.Errorf("descriptor %d of the offer: %w", i, err)
		}
		n, ok := offered[ap]
		if !ok {
			return fmt.Errorf("descriptor %d of the offer is bound to %s, not to an offered address", i, ap)
		}
		if tcp {
			n[1]++
		} else {
			n[0]++
		}
		offered[ap] = n
	}
	for ap, n := range offered {
		if n[0] == 0 || n[1] == 0 {
			return fmt.Errorf("predecessor's offer has %d UDP and %d TCP sockets for %s, want at least one of each", n[0], n[1], ap)
		}
	}
	return nil
}

// checkListener returns the address f is bound to when it is a UDP socket
// (tcp false) or a listening TCP socket (tcp true) of IPv4 or IPv6.
func checkListener(f *os.File, tcp bool) (netip.AddrPort, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var s sockInfo
	if err := raw.Control(func(fd uintptr) { s = readSockInfo(int(fd)) }); err != nil {
		return netip.AddrPort{}, err
	}
	if s.err != nil {
		if errors.Is(s.err, unix.ENOTSOCK) {
			return netip.AddrPort{}, errors.New("not a socket")
		}
		return netip.AddrPort{}, fmt.Errorf("reading its socket options: %w", s.err)
	}
	want := "a UDP socket"
	if tcp {
		want = "a TCP listener"
	}
	inet := s.domain == unix.AF_INET || s.domain == unix.AF_INET6
	udpOK := s.typ == unix.SOCK_DGRAM && s.proto == unix.IPPROTO_UDP
	tcpOK := s.typ == unix.SOCK_STREAM && (s.proto == unix.IPPROTO_TCP || s.proto == ipprotoMPTCP)
	if !inet || (!tcp && !udpOK) || (tcp && !tcpOK) {
		return netip.AddrPort{}, fmt.Errorf("is a %s socket, want %s", s.kind(), want)
	}
	if tcp && !s.listening {
		return netip.AddrPort{}, errors.New("is a TCP socket that is not listening, want a TCP listener")
	}
	return s.addr, nil
}

// sockInfo is what the kernel says about a descriptor.
type sockInfo struct {
	domain, typ, proto int
	listening          bool
	addr               netip.AddrPort
	err                error
}

func readSockInfo(fd int) sockInfo {
	var s sockInfo
	get := func(opt int) int {
		v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
		if err != nil && s.err == nil {
			s.err = err
		}
		return v
	}
	s.typ = get(unix.SO_TYPE)
	s.domain = get(unix.SO_DOMAIN)
	s.proto = get(unix.SO_PROTOCOL)
	s.listening = get(unix.SO_ACCEPTCONN) == 1
	if s.err != nil {
		return s
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		s.err = err
		return s
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		s.addr = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		s.addr = unmap(netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port)))
	}
	return s
}

// kind names the socket for an error message.
func (s sockInfo) kind() string {
	family := map[int]string{unix.AF_INET: "IPv4", unix.AF_INET6: "IPv6", unix.AF_UNIX: "unix"}[s.domain]
	if family == "" {
		family = fmt.Sprintf("family %d", s.domain)
	}
	switch {
	case s.domain == unix.AF_UNIX && s.typ == unix.SOCK_DGRAM:
		return "unix datagram"
	case s.domain == unix.AF_UNIX:
		return "unix stream"
	case s.proto == unix.IPPROTO_UDP:
		return family + " UDP"
	case s.proto == unix.IPPROTO_TCP, s.proto == ipprotoMPTCP:
		return family + " TCP"
	}
	return fmt.Sprintf("%s type %d protocol %d", family, s.typ, s.proto)
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
