package upstream

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func aps(tb testing.TB, ss ...string) []netip.AddrPort {
	tb.Helper()
	out := make([]netip.AddrPort, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddrPort(s))
	}
	return out
}

func writeFile(tb testing.TB, dir, name, content string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

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
		{spec: "", wantErr: "empty upstream spec"},
		{spec: "dns.google", wantErr: "is not IP[:port]"},
		{spec: "1.1.1.1,", wantErr: "empty server address"},
		{spec: "1.1.1.1:0", wantErr: "port 0"},
		{spec: "1.1.1.1:99999", wantErr: "is not IP[:port]"},
		{spec: "0.0.0.0", wantErr: "unspecified"},
		{spec: "224.0.0.1", wantErr: "multicast"},
		{spec: "2001:db8::1:53:x", wantErr: "is not IP[:port]"},
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
		if want := aps(t, tt.want...); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseServers(%q): got %v, want %v", tt.spec, got, want)
		}
	}
}

func TestParseStubDomain(t *testing.T) {
	tests := []struct {
		spec       string
		wantDomain string
		want       []string
		wantErr    string
	}{
		{spec: "corp.example=10.0.0.1,10.0.0.2", wantDomain: "corp.example.", want: []string{"10.0.0.1:53", "10.0.0.2:53"}},
		{spec: "Corp.Example.=[2001:db8::1]:5353", wantDomain: "corp.example.", want: []string{"[2001:db8::1]:5353"}},
		{spec: "consul=127.0.0.1:8600", wantDomain: "consul.", want: []string{"127.0.0.1:8600"}},
		{spec: "corp.example", wantErr: "want domain=IP[:port]"},
		{spec: "=10.0.0.1", wantErr: "must not be empty or the root"},
		{spec: ".=10.0.0.1", wantErr: "must not be empty or the root"},
		{spec: "corp.example=", wantErr: "no servers"},
		{spec: "corp..example=10.0.0.1", wantErr: "is not a domain name"},
		{spec: "corp.example=10.0.0.1,nope", wantErr: `server "nope" is not IP[:port]`},
	}
	for _, tt := range tests {
		domain, got, err := ParseStubDomain(tt.spec)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseStubDomain(%q): got error %v, want one containing %q", tt.spec, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseStubDomain(%q): %v", tt.spec, err)
			continue
		}
		if domain != tt.wantDomain {
			t.Errorf("ParseStubDomain(%q): got domain %q, want %q", tt.spec, domain, tt.wantDomain)
		}
		if want := aps(t, tt.want...); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseStubDomain(%q): got %v, want %v", tt.spec, got, want)
		}
	}
}

// mountConfigMap lays files out as the kubelet mounts a ConfigMap: real
// files in a timestamped directory, reached through the ..data symlink.
func mountConfigMap(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	data := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	if err := os.Mkdir(data, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		tb.Fatal(err)
	}
	for name, content := range files {
		writeFile(tb, data, name, content)
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func TestLoadKubeDNSConfig(t *testing.T) {
	tests := []struct {
		name          string
		files         map[string]string
		wantStubs     map[string][]netip.AddrPort
		wantUpstreams []netip.AddrPort
		wantErr       string
	}{
		{
			name: "both files",
			files: map[string]string{
				"stubDomains":         `{"acme.local": ["1.2.3.4"], "Corp.Example": ["10.0.0.1:5353", "2001:db8::1"]}`,
				"upstreamNameservers": `["8.8.8.8", "8.8.4.4:53"]`,
			},
			wantStubs: map[string][]netip.AddrPort{
				"acme.local.":   aps(t, "1.2.3.4:53"),
				"corp.example.": aps(t, "10.0.0.1:5353", "[2001:db8::1]:53"),
			},
			wantUpstreams: aps(t, "8.8.8.8:53", "8.8.4.4:53"),
		},
		{name: "empty configmap", files: map[string]string{}, wantStubs: map[string][]netip.AddrPort{}},
		{
			name:          "only upstreams, blank stubs",
			files:         map[string]string{"upstreamNameservers": `["8.8.8.8"]`, "stubDomains": "\n"},
			wantStubs:     map[string][]netip.AddrPort{},
			wantUpstreams: aps(t, "8.8.8.8:53"),
		},
		{name: "bad JSON", files: map[string]string{"stubDomains": `{"a": "1.2.3.4"}`}, wantErr: "parsing"},
		{name: "bad IP", files: map[string]string{"upstreamNameservers": `["8.8.8"]`}, wantErr: `upstreamNameservers: server "8.8.8"`},
		{name: "bad domain", files: map[string]string{"stubDomains": `{"a..b": ["1.2.3.4"]}`}, wantErr: `stub domain "a..b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stubs, upstreams, err := LoadKubeDNSConfig(mountConfigMap(t, tt.files))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(stubs, tt.wantStubs) {
				t.Errorf("stubs: got %v, want %v", stubs, tt.wantStubs)
			}
			if !reflect.DeepEqual(upstreams, tt.wantUpstreams) {
				t.Errorf("upstreams: got %v, want %v", upstreams, tt.wantUpstreams)
			}
		})
	}
	if _, _, err := LoadKubeDNSConfig(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Errorf("missing directory: got nil error, want one")
	}
}
