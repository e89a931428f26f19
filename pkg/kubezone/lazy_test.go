package kubezone

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// Tests of the names answered at query time: endpoint host names (from the
// service entries) and PTRs (from the PTR index).

func TestParseReverse(t *testing.T) {
	for _, ip := range []string{"10.96.0.1", "0.0.0.0", "255.255.255.255", "192.168.0.10", "fd00::1", "::",
		"2001:db8:abcd:ef01:2345:6789:abcd:ef01", "::1"} {
		a := netip.MustParseAddr(ip)
		k, ok := parseReverse(reverseName(a))
		if !ok || keyAddr(k) != a {
			t.Errorf("parseReverse(reverseName(%s)): got %v %v, want %v", ip, keyAddr(k), ok, a)
		}
	}
	six := reverseName(netip.MustParseAddr("fd00::1"))
	for _, bad := range []string{
		"10.in-addr.arpa.", "0.10.in-addr.arpa.", "0.96.10.in-addr.arpa.", "in-addr.arpa.", "ip6.arpa.", // partial
		"1.1.0.96.10.in-addr.arpa.",                            // too long
		"01.0.96.10.in-addr.arpa.", "1.0.96.010.in-addr.arpa.", // leading zeros
		"256.0.96.10.in-addr.arpa.", "1..96.10.in-addr.arpa.", // out of range, empty label
		"-1.0.96.10.in-addr.arpa.", "1.0.96.10a.in-addr.arpa.", // not decimal
		"1.0.96.10.in-addr.arpa", "1.0.96.10.example.", // not a reverse name
		six[2:],                                // 31 nibbles
		"0." + six,                             // 33 nibbles
		strings.Replace(six, "d", "D", 1),      // upper case (callers lowercase)
		strings.Replace(six, "d.f", "dxf", 1),  // not a dot between nibbles
		strings.Replace(six, "1.", "g.", 1),    // not hex
		strings.Replace(six, "1.0.", "10.", 1), // two-character label
		reverseName(netip.AddrFrom16(netip.MustParseAddr("10.96.0.1").As16())), // ::ffff:10.96.0.1: its PTR is in-addr
	} {
		if k, ok := parseReverse(bad); ok {
			t.Errorf("parseReverse(%q): got %v, want refused", bad, keyAddr(k))
		}
	}
}

// lazyZone builds a zone from models (namespace ns) without informers.
func lazyZone(t testing.TB, objs ...any) *Zone {
	t.Helper()
	evs := []event{{kind: objNamespace, key: "ns", obj: nsPresent{}}}
	for _, o := range objs {
		switch m := o.(type) {
		case *svcModel:
			evs = append(evs, event{kind: objService, key: m.key(), obj: m})
		case *sliceModel:
			evs = append(evs, event{kind: objSlice, key: m.key(), obj: m})
		}
	}
	return buildZone(t, evs)
}

func applyModels(z *Zone, evs ...event) {
	for _, ev := range evs {
		z.enqueue(ev)
	}
	z.drain()
}

func lazySvc(name string, ips ...string) *svcModel {
	s := &svcModel{Namespace: "ns", Name: name, Ports: []portModel{{Name: "http", Protocol: "tcp", Port: 80}}}
	if len(ips) == 0 {
		s.Headless = true
	}
	for _, ip := range ips {
		s.ClusterIPs = append(s.ClusterIPs, netip.MustParseAddr(ip))
	}
	return s
}

func lazySlice(name, svc string, eps ...epModel) *sliceModel {
	return &sliceModel{Namespace: "ns", Name: name, Service: svc, Endpoints: newEPList(eps),
		Ports: []portModel{{Name: "http", Protocol: "tcp", Port: 8080}}}
}

func epAt(ip, host string) epModel { return epModel{Addr: netip.MustParseAddr(ip), Hostname: host} }

// ptrs returns the PTR targets of ip in answer order ("REFUSED" when the
// zone does not own the name).
func ptrs(t testing.TB, z *Zone, ip string) string {
	t.Helper()
	rev := reverseName(netip.MustParseAddr(ip))
	a := z.Lookup(rev, dns.TypePTR)
	if a.Rcode == dns.RcodeRefused {
		if z.InZone(rev) {
			t.Errorf("InZone(%s): got true for a refused name", rev)
		}
		return "REFUSED"
	}
	if !z.InZone(rev) {
		t.Errorf("InZone(%s): got false for an answered name", rev)
	}
	var out []string
	for _, rr := range a.Answer {
		out = append(out, rr.(*dns.PTR).Ptr)
	}
	return strings.Join(out, " ")
}

func TestPTRSharedAddress(t *testing.T) {
	// 10.0.0.7 is an endpoint of two services and the ClusterIP of a third;
	// fd00::7 an endpoint of two services. One PTR per target, sorted.
	z := lazyZone(t,
		lazySvc("zeta", "10.96.0.1"), lazySlice("zeta-1", "zeta", epAt("10.0.0.7", ""), epAt("fd00::7", "")),
		lazySvc("alpha", "10.0.0.7"),
		lazySvc("mid"), lazySlice("mid-1", "mid", epAt("10.0.0.7", "m-0"), epAt("fd00::7", "m-0")))
	for _, c := range []struct{ ip, want string }{
		{"10.0.0.7", "10-0-0-7.zeta.ns.svc.cluster.local. alpha.ns.svc.cluster.local. m-0.mid.ns.svc.cluster.local."},
		{"fd00::7", "fd00--7.zeta.ns.svc.cluster.local. m-0.mid.ns.svc.cluster.local."},
		{"10.96.0.1", "zeta.ns.svc.cluster.local."},
		{"10.0.0.8", "REFUSED"},
	} {
		if got := ptrs(t, z, c.ip); got != c.want {
			t.Errorf("PTR %s: got %q, want %q", c.ip, got, c.want)
		}
	}
	rev := reverseName(netip.MustParseAddr("10.0.0.7"))
	checkAnswer(t, "A at a reverse name", z.Lookup(rev, dns.TypeA), ok, nil, true, "")
	if got := z.Lookup(rev, dns.TypeA).Ns[0].Header().Name; got != "in-addr.arpa." {
		t.Errorf("SOA owner of a reverse NODATA: got %q, want in-addr.arpa.", got)
	}
	checkAnswer(t, "partial reverse name", z.Lookup("0.0.10.in-addr.arpa.", dns.TypePTR), dns.RcodeRefused, nil, false, "")
	if z.InZone("0.0.10.in-addr.arpa.") {
		t.Errorf("InZone(0.0.10.in-addr.arpa.): got true, want false")
	}
}

func TestEndpointHostLabels(t *testing.T) {
	// The same address in two slices, once with a hostname and once
	// without; a hostname too long for a label; a hostname equal to another
	// endpoint's dashed IP; an address listed twice.
	long := strings.Repeat("h", 64)
	z := lazyZone(t, lazySvc("web", "10.96.0.1"),
		lazySlice("web-a", "web", epAt("10.0.0.1", "w-0"), epAt("10.0.0.2", ""), epAt("fd00::2", ""), epAt("10.0.0.3", long)),
		lazySlice("web-b", "web", epAt("10.0.0.1", ""), epAt("10.0.0.2", ""), epAt("10.0.0.9", "10-0-0-2"), epAt("fd00::1", "w-0")))
	const base = ".web.ns.svc.cluster.local."
	for _, c := range []struct {
		label string
		qtype uint16
		rcode int
		want  []string
	}{
		{"w-0", dns.TypeA, ok, []string{"w-0" + base + " A 10.0.0.1"}},
		{"w-0", dns.TypeAAAA, ok, []string{"w-0" + base + " AAAA fd00::1"}},
		{"w-0", dns.TypeANY, ok, []string{"w-0" + base + " A 10.0.0.1", "w-0" + base + " AAAA fd00::1"}},
		{"w-0", dns.TypeSRV, ok, nil},
		{"10-0-0-1", dns.TypeA, ok, []string{"10-0-0-1" + base + " A 10.0.0.1"}},
		{"10-0-0-2", dns.TypeA, ok, []string{"10-0-0-2" + base + " A 10.0.0.2", "10-0-0-2" + base + " A 10.0.0.9"}},
		{"10-0-0-3", dns.TypeA, ok, []string{"10-0-0-3" + base + " A 10.0.0.3"}},
		{"fd00--2", dns.TypeAAAA, ok, []string{"fd00--2" + base + " AAAA fd00::2"}},
		{"fd00-0-0-0-0-0-0-2", dns.TypeAAAA, nx, nil}, // not the dashed form CoreDNS writes
		{"10-0-0-9", dns.TypeA, nx, nil},              // it has a hostname
		{long, dns.TypeA, nx, nil},
		{"nope", dns.TypeA, nx, nil},
	} {
		got := z.Lookup(c.label+base, c.qtype)
		checkAnswer(t, c.label+" "+dns.TypeToString[c.qtype], got, c.rcode, c.want, c.rcode != ok || c.want == nil, "")
	}
	if got, want := ptrs(t, z, "10.0.0.1"), "10-0-0-1"+base+" w-0"+base; got != want {
		t.Errorf("PTR 10.0.0.1: got %q, want %q", got, want)
	}
	if got, want := ptrs(t, z, "10.0.0.9"), "10-0-0-2"+base; got != want {
		t.Errorf("PTR 10.0.0.9: got %q, want %q", got, want)
	}
}

func TestPTRUpdates(t *testing.T) {
	a, b := lazySvc("a", "10.96.0.1"), lazySvc("b", "10.96.0.2")
	z := lazyZone(t, a, lazySlice("a-1", "a", epAt("10.0.0.5", "")), b, lazySlice("b-1", "b", epAt("10.0.0.6", "")))
	names := z.Stats().Names

	// The endpoint moves from a to b: a's PTR target disappears.
	moved := lazySlice("b-1", "b", epAt("10.0.0.6", ""), epAt("10.0.0.5", "b-0"))
	applyModels(z, event{kind: objSlice, key: "ns/a-1", obj: lazySlice("a-1", "a")},
		event{kind: objSlice, key: moved.key(), obj: moved})
	if got, want := ptrs(t, z, "10.0.0.5"), "b-0.b.ns.svc.cluster.local."; got != want {
		t.Errorf("PTR after the move: got %q, want %q", got, want)
	}
	checkAnswer(t, "old host name", z.Lookup("10-0-0-5.a.ns.svc.cluster.local.", dns.TypeA), nx, nil, true, "")
	checkAnswer(t, "new host name", z.Lookup("b-0.b.ns.svc.cluster.local.", dns.TypeA), ok,
		[]string{"b-0.b.ns.svc.cluster.local. A 10.0.0.5"}, false, "")
	if got := z.Stats().Names; got != names {
		t.Errorf("Stats.Names after the move: got %d, want %d (one host name moved)", got, names)
	}

	// Deleting b removes every PTR it published and its host names.
	applyModels(z, event{kind: objService, key: b.key()})
	for _, ip := range []string{"10.96.0.2", "10.0.0.5", "10.0.0.6"} {
		if got := ptrs(t, z, ip); got != "REFUSED" {
			t.Errorf("PTR %s after deleting the service: got %q, want REFUSED", ip, got)
		}
	}
	checkAnswer(t, "host of a deleted service", z.Lookup("b-0.b.ns.svc.cluster.local.", dns.TypeA), nx, nil, true, "")
	if got, want := ptrs(t, z, "10.96.0.1"), "a.ns.svc.cluster.local."; got != want {
		t.Errorf("PTR of the other service: got %q, want %q", got, want)
	}
	// b's base name, SRV name and its ENT, two host names, three reverse names.
	if got, want := z.Stats().Names, names-8; got != want {
		t.Errorf("Stats.Names after the deletion: got %d, want %d", got, want)
	}
	if got := z.ptrs.keys.Load(); got != 1 {
		t.Errorf("addresses in the PTR index: got %d, want 1", got)
	}
}

// TestLazyLookupAllocs pins what allocates: prebuilt answers never do.
func TestLazyLookupAllocs(t *testing.T) {
	z := lazyZone(t, lazySvc("web", "10.96.0.1"), lazySlice("web-1", "web", epAt("10.0.0.1", "")))
	for _, c := range []struct {
		qname string
		qtype uint16
	}{
		{"web.ns.svc.cluster.local.", dns.TypeA},
		{"_http._tcp.web.ns.svc.cluster.local.", dns.TypeSRV},
		{"nope.ns.svc.cluster.local.", dns.TypeA},
		{"nope.web.ns.svc.cluster.local.", dns.TypeA},
		{"10-0-0-9.web.ns.svc.cluster.local.", dns.TypeA},
		{"2.0.0.10.in-addr.arpa.", dns.TypePTR},
	} {
		if n := testing.AllocsPerRun(100, func() { z.Lookup(c.qname, c.qtype) }); n != 0 {
			t.Errorf("Lookup(%s): got %v allocations, want 0", c.qname, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { z.InZone("1.0.0.10.in-addr.arpa.") }); n != 0 {
		t.Errorf("InZone(reverse name): got %v allocations, want 0", n)
	}
}

// TestEPIndexMatchesScan: a service large enough for an epIndex answers
// every host name and PTR as the scan of its endpoints does.
func TestEPIndexMatchesScan(t *testing.T) {
	hosts := []string{"", "", "w-0", "w-1", "a.b", strings.Repeat("h", 64), "10-0-0-3", "fd00--2"}
	var addrs []string
	for i := range 40 {
		addrs = append(addrs, netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}).String(), netip.AddrFrom16([16]byte{0xfd, 15: byte(i)}).String())
	}
	var objs []any
	objs = append(objs, lazySvc("big", "10.96.0.1"))
	for s := range 3 {
		var eps []epModel
		for i := range 2 * epIndexMin / 3 {
			eps = append(eps, epAt(addrs[(i*7+s*3)%len(addrs)], hosts[(i+s)%len(hosts)]))
		}
		objs = append(objs, lazySlice("big-"+string(rune('a'+s)), "big", eps...))
	}
	z := lazyZone(t, objs...)
	e := z.tab.get("big.ns.svc.cluster.local.").svc.entry()
	if e == nil || e.idx == nil {
		t.Fatalf("entry of a %d-endpoint service: got %+v, want one with an index", 2*epIndexMin, e)
	}
	scan := *e
	scan.idx = nil
	labels := append(slices.Clone(hosts), "nope", "10-0-0-01", "fd00-0-0-0-0-0-0-2")
	for _, a := range addrs {
		labels = append(labels, dashedIP(netip.MustParseAddr(a)))
	}
	for _, l := range labels {
		if got, want := e.hostAddrs(l), scan.hostAddrs(l); !slices.Equal(got, want) {
			t.Errorf("hostAddrs(%q): got %v, want %v", l, got, want)
		}
	}
	for _, a := range append(addrs, "10.96.0.1", "10.9.9.9") {
		k := netip.MustParseAddr(a).As16()
		got, want := e.ptrTargets(k, nil), scan.ptrTargets(k, nil)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("ptrTargets(%s): got %v, want %v", a, got, want)
		}
	}
}

// TestConcurrentLazyReaders: host name and PTR lookups run while the writer
// replaces the entries and PTR index slots they read (run with -race).
func TestConcurrentLazyReaders(t *testing.T) {
	evs := synthCluster(200, 5)
	z := buildZone(t, evs)
	changing := reverseName(evs[len(evs)-1].obj.(*sliceModel).Endpoints.addr(0)) // svc-199's first endpoint
	var wg sync.WaitGroup
	var done atomic.Bool
	failed := make(chan string, 2)
	for range 2 {
		wg.Go(func() {
			for !done.Load() {
				if msg := checkLazyAnswers(z, changing); msg != "" {
					failed <- msg
					return
				}
			}
		})
	}
	es := *evs[len(evs)-1].obj.(*sliceModel)
	eps := es.Endpoints.models()
	for i := range 500 {
		fewer := es
		fewer.Endpoints = newEPList(eps[i%2 : 1+i%len(eps)]) // the first endpoint comes and goes
		z.enqueue(event{kind: objSlice, key: es.key(), obj: &fewer})
		z.drain()
	}
	done.Store(true)
	wg.Wait()
	close(failed)
	for msg := range failed {
		t.Error(msg)
	}
}

// checkLazyAnswers returns what is wrong with the answers of a stable host
// name, a stable PTR and the PTR at changing, or "".
func checkLazyAnswers(z *Zone, changing string) string {
	if a := z.Lookup("10-0-0-6.svc-1.ns-1.svc.cluster.local.", dns.TypeA); a.Rcode != ok || len(a.Answer) != 1 {
		return "stable host name: got rcode " + dns.RcodeToString[a.Rcode]
	}
	if a := z.Lookup("6.0.0.10.in-addr.arpa.", dns.TypePTR); a.Rcode != ok || len(a.Answer) != 1 {
		return "stable PTR: got rcode " + dns.RcodeToString[a.Rcode]
	}
	if a := z.Lookup(changing, dns.TypePTR); a.Rcode == ok && len(a.Answer) == 0 {
		return "changing PTR: NOERROR without records"
	}
	return ""
}

// TestParseDashedLabel: the allocation-free parser accepts exactly the
// labels dashedIP writes, like parseDashedIP followed by dashedIP.
func TestParseDashedLabel(t *testing.T) {
	for _, label := range []string{"10-0-0-1", "0-0-0-0", "255-255-255-255", "10-0-0-01", "256-0-0-1", "1-2-3",
		"1-2-3-4-5", "-1-2-3", "1-2-3-", "1--2-3", "--1-2", "1-2--3", "fd00--1", "fd00--0", "fd00--", "fd00-0-0-0-0-0-0-1",
		"2001-db8-1-2-3-4-5-6", "a-b-c", "10-0-0-1a", "web-0", "", "-", "--", "--0", "ffff-10-0-0-1"} {
		want, wantOK := parseDashedIP(label)
		wantOK = wantOK && dashedIP(want) == label
		got, gotOK := parseDashedLabel(label)
		if gotOK != wantOK || (wantOK && got != want) {
			t.Errorf("parseDashedLabel(%q): got %v %v, want %v %v", label, got, gotOK, want, wantOK)
		}
	}
}

// FuzzParseReverse: a reverse name is accepted only when it is the reverse
// name of the address it parses to (so no other name is in the zone).
func FuzzParseReverse(f *testing.F) {
	for _, s := range []string{"1.0.96.10.in-addr.arpa.", reverseName(netip.MustParseAddr("fd00::1")), "10.in-addr.arpa.",
		"01.0.0.10.in-addr.arpa.", "1.0.0.0.ip6.arpa."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if k, ok := parseReverse(name); ok && reverseName(keyAddr(k)) != name {
			t.Errorf("parseReverse(%q): got %v, whose reverse name is %q", name, keyAddr(k), reverseName(keyAddr(k)))
		}
	})
}

// FuzzParseDashedLabel: the allocation-free parser agrees with
// parseDashedIP followed by dashedIP.
func FuzzParseDashedLabel(f *testing.F) {
	for _, s := range []string{"10-0-0-1", "1--2-3", "fd00--1", "10-0-0-01", "web-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, label string) {
		want, wantOK := parseDashedIP(label)
		wantOK = wantOK && dashedIP(want) == label
		if got, gotOK := parseDashedLabel(label); gotOK != wantOK || (wantOK && got != want) {
			t.Errorf("parseDashedLabel(%q): got %v %v, want %v %v", label, got, gotOK, want, wantOK)
		}
	})
}
