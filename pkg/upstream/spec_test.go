package upstream

import (
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseServers(t *testing.T) {
	dir := t.TempDir()
	resolv := writeFile(t, dir, "resolv.conf", `# generated
search default.svc.cluster.local svc.cluster.local
nameserver 10.0.0.10
options ndots:5
; comment
nameserver   2001:db8::53
nameserver fe80::1%eth0
`)
	empty := writeFile(t, dir, "empty.conf", "search example.com\noptions edns0\n")
	badNS := writeFile(t, dir, "bad.conf", "nameserver 10.0.0.1\nnameserver dns.example\n")

	tests := []struct {
		spec    string
		want    []string
		tls     map[string]string // server -> name to verify
		wantErr string
	}{
		{spec: "1.1.1.1", want: []string{"1.1.1.1:53"}},
		{spec: "1.1.1.1:5353", want: []string{"1.1.1.1:5353"}},
		{spec: " 1.1.1.1 , 8.8.8.8:53 ", want: []string{"1.1.1.1:53", "8.8.8.8:53"}},
		{spec: "::1", want: []string{"[::1]:53"}},
		{spec: "[::1]", want: []string{"[::1]:53"}},
		{spec: "[2001:db8::1]:5353", want: []string{"[2001:db8::1]:5353"}},
		{spec: "::ffff:10.0.0.1", want: []string{"10.0.0.1:53"}},
		{spec: resolv, want: []string{"10.0.0.10:53", "[2001:db8::53]:53", "[fe80::1%eth0]:53"}},
		{spec: "tls://9.9.9.9#dns.quad9.net", want: []string{"9.9.9.9:853"}, tls: map[string]string{"9.9.9.9:853": "dns.quad9.net"}},
		{spec: "10.0.0.1,tls://[2620:fe::fe]:8853,tls://1.1.1.1", want: []string{"10.0.0.1:53", "[2620:fe::fe]:8853", "1.1.1.1:853"},
			tls: map[string]string{"[2620:fe::fe]:8853": "2620:fe::fe", "1.1.1.1:853": "1.1.1.1"}},
		{spec: "tls://[::1]", want: []string{"[::1]:853"}, tls: map[string]string{"[::1]:853": "::1"}},
		{spec: "", wantErr: "empty upstream spec"},
		{spec: "dns.google", wantErr: "is not IP[:port]"},
		{spec: "1.1.1.1,", wantErr: "empty server address"},
		{spec: "1.1.1.1:0", wantErr: "port 0"},
		{spec: "1.1.1.1:99999", wantErr: "is not IP[:port]"},
		{spec: "0.0.0.0", wantErr: "unspecified"},
		{spec: "224.0.0.1", wantErr: "multicast"},
		{spec: "2001:db8::1:53:x", wantErr: "is not IP[:port]"},
		{spec: "tls://nope#x", wantErr: "want tls://IP[:port][#SERVER-NAME]"},
		{spec: "tls://[::1]:53x", wantErr: "want tls://IP[:port][#SERVER-NAME]"},
		{spec: "tls://nope", wantErr: "want tls://IP[:port][#SERVER-NAME]"},
		{spec: "tls://0.0.0.0", wantErr: "unspecified"},
		{spec: "tls://9.9.9.9:0", wantErr: "port 0"},
		{spec: "tls://9.9.9.9#dns quad9", wantErr: "is not a host name"},
		{spec: "tls://9.9.9.9#a..b", wantErr: "is not a host name"},
		{spec: "tls://9.9.9.9," + resolv, wantErr: "must be the whole spec"},
		{spec: empty, wantErr: "no nameserver lines in " + empty},
		{spec: badNS, wantErr: "line 2: nameserver \"dns.example\" is not an IP"},
		{spec: filepath.Join(dir, "missing.conf"), wantErr: "reading resolv.conf"},
	}
	for _, tt := range tests {
		got, err := ParseServers(tt.spec)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseServers(%q): got error %v, want one containing %q", tt.spec, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseServers(%q): %v", tt.spec, err)
			continue
		}
		if want := aps(t, tt.want...); !reflect.DeepEqual(got.Addrs, want) {
			t.Errorf("ParseServers(%q): got %v, want %v", tt.spec, got.Addrs, want)
		}
		var wantTLS map[netip.AddrPort]string
		for s, name := range tt.tls {
			if wantTLS == nil {
				wantTLS = map[netip.AddrPort]string{}
			}
			wantTLS[netip.MustParseAddrPort(s)] = name
		}
		if !reflect.DeepEqual(got.TLSNames, wantTLS) {
			t.Errorf("ParseServers(%q): got TLS names %v, want %v", tt.spec, got.TLSNames, wantTLS)
		}
	}
}

func TestParseStub(t *testing.T) {
	tests := []struct {
		spec       string
		wantDomain string
		want       []string
		wantErr    string
	}{
		{spec: "corp.example=10.0.0.1,10.0.0.2", wantDomain: "corp.example.", want: []string{"10.0.0.1:53", "10.0.0.2:53"}},
		{spec: "Corp.Example.=[2001:db8::1]:5353", wantDomain: "corp.example.", want: []string{"[2001:db8::1]:5353"}},
		{spec: "consul=127.0.0.1:8600", wantDomain: "consul.", want: []string{"127.0.0.1:8600"}},
		{spec: "secure.example=tls://10.0.0.9#dns.test", wantDomain: "secure.example.", want: []string{"10.0.0.9:853"}},
		{spec: "", wantErr: "empty stub domain"},
		{spec: "corp.example", wantErr: "want domain=IP[:port]"},
		{spec: "=10.0.0.1", wantErr: "must not be empty or the root"},
		{spec: ".=10.0.0.1", wantErr: "must not be empty or the root"},
		{spec: "corp.example=", wantErr: "no servers"},
		{spec: "corp..example=10.0.0.1", wantErr: "is not a domain name"},
		{spec: "corp..example=tls://10.0.0.1", wantErr: "is not a domain name"},
		{spec: "corp.example=10.0.0.1,nope", wantErr: `server "nope" is not IP[:port]`},
		{spec: "corp.example=tls://nope", wantErr: "want tls://IP[:port][#SERVER-NAME]"},
		{spec: "corp.example=/etc/resolv.conf", wantErr: "must be the whole spec"},
		{spec: "corp.example=10.0.0.1 max-ttl=500ms", wantErr: "at least 1s"},
		{spec: "corp.example=10.0.0.1 max-negative-ttl=x", wantErr: "at least 1s"},
		{spec: "corp.example=10.0.0.1 fast", wantErr: `unknown stub domain option "fast"`},
		{spec: "corp.example=10.0.0.1 force-tcp=yes", wantErr: "unknown stub domain option"},
		{spec: "corp.example=10.0.0.1 timeout=-1s", wantErr: "positive duration"},
		{spec: "corp.example=10.0.0.1 timeout=0s", wantErr: "positive duration"},
		{spec: "corp.example=10.0.0.1 timeout=x", wantErr: "positive duration"},
		{spec: "corp.example=10.0.0.1 max-concurrent=-1", wantErr: "positive number"},
		{spec: "corp.example=10.0.0.1 max-concurrent=a", wantErr: "positive number"},
		{spec: "corp.example=10.0.0.1 policy=fastest", wantErr: "unknown policy"},
	}
	for _, tt := range tests {
		s, err := ParseStub(tt.spec)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseStub(%q): got error %v, want one containing %q", tt.spec, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseStub(%q): %v", tt.spec, err)
			continue
		}
		if s.Domain != tt.wantDomain {
			t.Errorf("ParseStub(%q): got domain %q, want %q", tt.spec, s.Domain, tt.wantDomain)
		}
		if want := aps(t, tt.want...); !reflect.DeepEqual(s.Servers.Addrs, want) {
			t.Errorf("ParseStub(%q): got %v, want %v", tt.spec, s.Servers.Addrs, want)
		}
	}
}

func TestParseStubOptions(t *testing.T) {
	s, err := ParseStub("Corp.Example=10.0.0.1,tls://10.0.0.2:5353#dns.corp.example policy=sequential force-tcp prefer-udp timeout=1500ms max-concurrent=20 max-ttl=30s max-negative-ttl=5s")
	if err != nil {
		t.Fatal(err)
	}
	want := Stub{Domain: "corp.example.",
		Servers: ServerList{Addrs: aps(t, "10.0.0.1:53", "10.0.0.2:5353"),
			TLSNames: map[netip.AddrPort]string{netip.MustParseAddrPort("10.0.0.2:5353"): "dns.corp.example"}},
		Options: StubOptions{Policy: PolicySequential, ForceTCP: true, TryTimeout: 1500 * time.Millisecond, MaxInFlight: 20},
		MaxTTL:  30 * time.Second, MaxNegativeTTL: 5 * time.Second}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got %+v, want %+v", s, want)
	}
}

// FuzzParseServers checks that every accepted server is usable.
func FuzzParseServers(f *testing.F) {
	for _, s := range []string{"1.1.1.1", "[::1]:53", "::1,8.8.8.8:5353", "1.1.1.1:0", ",", "[::1",
		"tls://9.9.9.9#dns.quad9.net", "tls://[::1]:853", "10.0.0.1,tls://1.1.1.1#x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if strings.ContainsRune(spec, '/') && !strings.Contains(spec, "://") {
			return // a path; not read during fuzzing
		}
		l, err := ParseServers(spec)
		if err != nil {
			return
		}
		cfg := Config{Servers: l.Addrs, TLS: TLSConfigs(l.TLSNames, nil)}
		if err := cfg.Validate(); err != nil {
			t.Errorf("ParseServers(%q) accepted %v, which Config.Validate refuses: %v", spec, l, err)
		}
		checkTLSNames(t, spec, l)
	})
}

// FuzzParseStub checks that every accepted stub domain is one the
// Forwarder takes.
func FuzzParseStub(f *testing.F) {
	for _, s := range []string{"corp.example=10.0.0.1", "Corp.Example.=[2001:db8::1]:5353 force-tcp",
		"consul=127.0.0.1:8600 policy=sequential timeout=1s max-concurrent=5",
		"a.b=tls://9.9.9.9#dns.quad9.net max-ttl=30s max-negative-ttl=5s", "=1.1.1.1", "x= ", "x=1.1.1.1 y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseStub(spec)
		if err != nil {
			return
		}
		cfg := Config{Servers: aps(t, "192.0.2.1:53"), StubDomains: map[string][]netip.AddrPort{s.Domain: s.Servers.Addrs},
			StubOptions: map[string]StubOptions{s.Domain: s.Options}, TLS: TLSConfigs(s.Servers.TLSNames, nil)}
		if err := cfg.Validate(); err != nil {
			t.Errorf("ParseStub(%q) accepted %+v, which Config.Validate refuses: %v", spec, s, err)
		}
		if (s.MaxTTL != 0 && s.MaxTTL < time.Second) || (s.MaxNegativeTTL != 0 && s.MaxNegativeTTL < time.Second) {
			t.Errorf("ParseStub(%q) accepted TTL caps under 1s: %+v", spec, s)
		}
		checkTLSNames(t, spec, s.Servers)
	})
}

// checkTLSNames fails unless every TLS name belongs to a listed server and
// is a host name.
func checkTLSNames(t *testing.T, spec string, l ServerList) {
	t.Helper()
	for ap, name := range l.TLSNames {
		if _, err := netip.ParseAddr(name); !isHostName(name) && err != nil {
			t.Errorf("%q: TLS name %q of %v is neither a host name nor an IP", spec, name, ap)
		}
		found := false
		for _, a := range l.Addrs {
			found = found || a == ap
		}
		if !found {
			t.Errorf("%q: TLS server %v is not among the servers %v", spec, ap, l.Addrs)
		}
	}
}
