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
