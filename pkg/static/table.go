package static

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// table is an immutable snapshot of the records, keyed by the lowercased
// wire form of a name.
type table struct {
	names map[string]*nameAnswers
}

// nameAnswers are one name's records and its prebuilt answers.
type nameAnswers struct {
	fqdn   string          // lowercased
	a      []dns.RR        // A
	aaaa   []dns.RR        // AAAA
	ptr    []dns.RR        // PTR, for the reverse name of an IP
	packed [3]*wire.Packed // A, AAAA, PTR; nil when the name has none
}

const (
	slotA = iota
	slotAAAA
	slotPTR
)

// hostsEntry is one parsed line.
type hostsEntry struct {
	ip    netip.Addr
	names []string // lowercased FQDNs
}

// parseHosts parses hosts-file text; src names it in errors. An error
// names src, the line and the field, never what they hold: src may be a
// file that is no hosts file (a secret, say), and errors reach the log.
func parseHosts(src, text string) ([]hostsEntry, error) {
	var out []hostsEntry
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 1
	for ; sc.Scan(); line++ {
		s, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(s)
		if len(f) == 0 {
			continue
		}
		e, field, err := parseEntry(f)
		switch {
		case err != nil && field > 0:
			return nil, fmt.Errorf("%s line %d field %d: %w", src, line, field, err)
		case err != nil:
			return nil, fmt.Errorf("%s line %d: %w", src, line, err)
		}
		out = append(out, e)
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return nil, fmt.Errorf("%s line %d: longer than %d bytes", src, line, bufio.MaxScanTokenSize)
	}
	return out, sc.Err()
}

// Why a hosts line does not parse; no error holds the line's text.
var (
	errFields = errors.New("want IP NAME [NAME...]")
	errIP     = errors.New("not an IP address")
	errName   = errors.New("not a domain name")
)

// parseEntry parses the fields of one hosts line; field is the 1-based
// position of the one that does not parse (0: the line as a whole).
func parseEntry(f []string) (e hostsEntry, field int, err error) {
	if len(f) < 2 {
		return hostsEntry{}, 0, errFields
	}
	ip, err := netip.ParseAddr(f[0])
	if err != nil {
		return hostsEntry{}, 1, errIP
	}
	e = hostsEntry{ip: ip.Unmap().WithZone("")}
	var buf [wire.MaxNameLen]byte
	for i, n := range f[1:] {
		fqdn := dns.Fqdn(strings.ToLower(n))
		if _, ok := dns.IsDomainName(n); !ok {
			return hostsEntry{}, i + 2, errName
		}
		if _, err := dns.PackDomainName(fqdn, buf[:], 0, nil, false); err != nil {
			return hostsEntry{}, i + 2, errName
		}
		e.names = append(e.names, fqdn)
	}
	return e, 0, nil
}

// buildTable turns entries into a table with answers of the given TTL.
func buildTable(entries []hostsEntry, ttl uint32, noReverse bool) (*table, error) {
	t := &table{names: map[string]*nameAnswers{}}
	get := func(fqdn string) (*nameAnswers, error) {
		buf := make([]byte, 256)
		n, err := dns.PackDomainName(fqdn, buf, 0, nil, false)
		if err != nil {
			return nil, fmt.Errorf("packing a static name: %w", err) // parseEntry packed it: unreachable
		}
		key := string(buf[:n])
		na, ok := t.names[key]
		if !ok {
			na = &nameAnswers{fqdn: fqdn}
			t.names[key] = na
		}
		return na, nil
	}
	seen := map[string]bool{}
	for _, e := range entries {
		for _, name := range e.names {
			k := e.ip.String() + " " + name
			if seen[k] {
				continue
			}
			seen[k] = true
			na, err := get(name)
			if err != nil {
				return nil, err
			}
			hdr := dns.RR_Header{Name: name, Class: dns.ClassINET, Ttl: ttl}
			if e.ip.Is4() {
				hdr.Rrtype = dns.TypeA
				na.a = append(na.a, &dns.A{Hdr: hdr, A: e.ip.AsSlice()})
			} else {
				hdr.Rrtype = dns.TypeAAAA
				na.aaaa = append(na.aaaa, &dns.AAAA{Hdr: hdr, AAAA: e.ip.AsSlice()})
			}
			if noReverse {
				continue
			}
			rev, _ := dns.ReverseAddr(e.ip.String())
			rna, err := get(rev)
			if err != nil {
				return nil, err
			}
			rna.ptr = append(rna.ptr, &dns.PTR{Hdr: dns.RR_Header{Name: rev, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: name})
		}
	}
	for _, na := range t.names {
		if err := na.prebuild(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// prebuild packs the answers for the types the name has.
func (na *nameAnswers) prebuild() error {
	sets := []struct {
		slot  int
		qtype uint16
		rrs   []dns.RR
	}{{slotA, dns.TypeA, na.a}, {slotAAAA, dns.TypeAAAA, na.aaaa}, {slotPTR, dns.TypePTR, na.ptr}}
	for _, s := range sets {
		if len(s.rrs) == 0 {
			continue
		}
		p, err := answer(na.fqdn, s.qtype, s.rrs)
		if err != nil {
			return err
		}
		na.packed[s.slot] = p
	}
	return nil
}

// answer packs an authoritative-looking reply with rrs (NODATA when
// empty).
func answer(name string, qtype uint16, rrs []dns.RR) (*wire.Packed, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Response, m.Authoritative, m.RecursionAvailable = true, true, true
	m.Answer = rrs
	p, err := wire.Pack(m)
	if err != nil {
		return nil, fmt.Errorf("packing the static answer for %s: %w", name, err)
	}
	return p, nil
}
