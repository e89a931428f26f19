package kubezone

import (
	"net/netip"
	"strings"
)

// dashedIP is the endpoint and pod label form of an address: 10-1-2-3, or for
// IPv6 the compressed form with ':' replaced by '-' and a '0' added after a
// trailing '-' (fd00--1, fd00--0), as CoreDNS writes it.
func dashedIP(a netip.Addr) string {
	if a.Is4() {
		return strings.ReplaceAll(a.String(), ".", "-")
	}
	s := strings.ReplaceAll(a.String(), ":", "-")
	if strings.HasSuffix(s, "-") {
		s += "0"
	}
	return s
}

// parseDashedIP is the inverse of dashedIP for pod names: "10-1-2-3" is an
// IPv4 address, a label with more than three dashes or any hex letter an
// IPv6 one. It accepts only labels that dashedIP could have written.
func parseDashedIP(label string) (netip.Addr, bool) {
	if strings.Count(label, "-") == 3 {
		if a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ".")); err == nil && a.Is4() {
			return a, true
		}
	}
	a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ":"))
	if err != nil || !a.Is6() || a.Zone() != "" || a.Is4In6() {
		return netip.Addr{}, false
	}
	return a, true
}

// reverseName is the PTR owner name of an address (in-addr.arpa. or nibble
// ip6.arpa.).
func reverseName(a netip.Addr) string {
	const hexdigits = "0123456789abcdef"
	var b strings.Builder
	if a.Is4() {
		v := a.As4()
		b.Grow(29)
		for i := 3; i >= 0; i-- {
			b.WriteString(itoa(int(v[i])))
			b.WriteByte('.')
		}
		b.WriteString("in-addr.arpa.")
		return b.String()
	}
	v := a.As16()
	b.Grow(73)
	for i := 15; i >= 0; i-- {
		b.WriteByte(hexdigits[v[i]&0xf])
		b.WriteByte('.')
		b.WriteByte(hexdigits[v[i]>>4])
		b.WriteByte('.')
	}
	b.WriteString("ip6.arpa.")
	return b.String()
}

// parseReverse is the exact inverse of reverseName: the address whose
// reverse name is name (lowercased). Any other name is refused (ok false),
// so that partial names (10.in-addr.arpa.), non-canonical ones (leading
// zeros, upper-case nibbles) and ip6.arpa. names of IPv4-mapped addresses
// stay outside the zone, as they were when reverse names were prebuilt. It
// does not allocate.
func parseReverse(name string) (k addrKey, ok bool) {
	if rest, found := strings.CutSuffix(name, ".in-addr.arpa."); found {
		return parseReverse4(rest)
	}
	if rest, found := strings.CutSuffix(name, ".ip6.arpa."); found {
		return parseReverse6(rest)
	}
	return k, false
}

// parseReverse4 parses "4.3.2.1" (the octets of 1.2.3.4, reversed).
func parseReverse4(s string) (addrKey, bool) {
	v, ok := parseQuad(s, '.')
	if !ok {
		return addrKey{}, false
	}
	return netip.AddrFrom4([4]byte{v[3], v[2], v[1], v[0]}).As16(), true
}

// parseQuad parses four octets separated by sep, each written as itoa
// writes it; anything else (fewer or more parts, a stray character) is
// refused. It does not allocate.
func parseQuad(s string, sep byte) (v [4]byte, ok bool) {
	for i := range 4 {
		part := s
		if i < 3 {
			cut := strings.IndexByte(s, sep)
			if cut < 0 {
				return v, false
			}
			part, s = s[:cut], s[cut+1:]
		}
		if v[i], ok = parseOctet(part); !ok {
			return v, false
		}
	}
	return v, true
}

// parseOctet parses a decimal 0..255 written as itoa writes it (no sign, no
// leading zero).
func parseOctet(s string) (byte, bool) {
	if len(s) == 0 || len(s) > 3 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n > 255 {
		return 0, false
	}
	return byte(n), true
}

// hexNibble parses one lowercase hex digit, as a reverse name writes it.
func hexNibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// parseReverse6 parses the 32 nibbles of an ip6.arpa. name, lowest first.
func parseReverse6(s string) (addrKey, bool) {
	var k addrKey
	if len(s) != 63 {
		return k, false
	}
	for j := range 32 {
		if j > 0 && s[2*j-1] != '.' {
			return k, false
		}
		nib, ok := hexNibble(s[2*j])
		if !ok {
			return k, false
		}
		i := 15 - j/2
		if j%2 == 0 {
			k[i] |= nib
		} else {
			k[i] |= nib << 4
		}
	}
	if netip.AddrFrom16(k).Is4In6() {
		return k, false // its PTR is under in-addr.arpa.
	}
	return k, true
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	var buf [3]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return string(buf[i:])
}

// isReverse reports whether qname is under in-addr.arpa. or ip6.arpa.
func isReverse(qname string) bool {
	return strings.HasSuffix(qname, ".in-addr.arpa.") || strings.HasSuffix(qname, ".ip6.arpa.")
}

// validLabel reports whether s can be one DNS label of a name we publish:
// 1 to 63 bytes, no dots.
func validLabel(s string) bool {
	return len(s) > 0 && len(s) <= 63 && !strings.ContainsRune(s, '.')
}

// validName reports whether an FQDN fits the 255-byte wire limit with
// labels of at most 63 bytes.
func validName(name string) bool {
	if len(name) > 254 {
		return false
	}
	for len(name) > 0 {
		i := strings.IndexByte(name, '.')
		if i <= 0 || i > 63 {
			return false
		}
		name = name[i+1:]
	}
	return true
}

// lower returns s lowercased, without allocating when s has no upper-case
// ASCII letters (the common case: the server lowercases before calling).
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// firstLabel splits "a.b.c." into "a" and "b.c.".
func firstLabel(name string) (label, rest string) {
	i := strings.IndexByte(name, '.')
	if i < 0 {
		return name, ""
	}
	return name[:i], name[i+1:]
}
