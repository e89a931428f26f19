package iface

import (
	"flag"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" means valid
	}{
		{"zero values but IPs", Config{LocalIPs: ip("169.254.20.10")}, ""},
		{"full", Config{InterfaceName: "nl0", LocalIPs: ip("fd00::a"), Port: 5353, ExtraTCPPorts: []uint16{8080},
			IPTablesMode: ModeLegacy, SyncInterval: time.Second}, ""},
		{"no IPs", Config{}, "at least one local IP"},
		{"invalid IP", Config{LocalIPs: []netip.Addr{{}}}, "invalid local IP"},
		{"mapped", Config{LocalIPs: ip("::ffff:169.254.20.10")}, "IPv4-mapped"},
		{"zone", Config{LocalIPs: ip("fe80::1%eth0")}, "zone"},
		{"unspecified", Config{LocalIPs: ip("0.0.0.0")}, "not a unicast"},
		{"loopback with setup", Config{LocalIPs: ip("127.0.0.1"), SetupInterface: true}, "loopback"},
		{"loopback with iptables", Config{LocalIPs: ip("::1"), SetupIPTables: true}, "loopback"},
		{"loopback, nothing set up", Config{LocalIPs: ip("127.0.0.1")}, ""},
		{"multicast", Config{LocalIPs: ip("ff02::1")}, "not a unicast"},
		{"long name", Config{InterfaceName: "a-very-long-ifname", LocalIPs: ip("10.0.0.1")}, "longer than"},
		{"slash in name", Config{InterfaceName: "a/b", LocalIPs: ip("10.0.0.1")}, "not a valid"},
		{"port 0", Config{LocalIPs: ip("10.0.0.1"), ExtraTCPPorts: []uint16{0}}, "port 0"},
		{"mode", Config{LocalIPs: ip("10.0.0.1"), IPTablesMode: "nftables"}, "iptables mode"},
		{"negative interval", Config{LocalIPs: ip("10.0.0.1"), SyncInterval: -time.Second}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	in := Config{
		LocalIPs:      []netip.Addr{netip.MustParseAddr("fd00::a"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.1")},
		ExtraTCPPorts: []uint16{9000, 53, 8080, 9000},
	}
	got := in.withDefaults()
	if got.InterfaceName != "nodelocaldns" || got.Port != 53 || got.IPTablesMode != ModeAuto || got.SyncInterval != 10*time.Second {
		t.Errorf("defaults: got %q %d %q %v, want nodelocaldns 53 auto 10s", got.InterfaceName, got.Port, got.IPTablesMode, got.SyncInterval)
	}
	if want := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::a")}; !slices.Equal(got.LocalIPs, want) {
		t.Errorf("LocalIPs: got %v, want %v", got.LocalIPs, want)
	}
	if want := []uint16{8080, 9000}; !slices.Equal(got.ExtraTCPPorts, want) {
		t.Errorf("ExtraTCPPorts: got %v, want %v (deduplicated, DNS port dropped)", got.ExtraTCPPorts, want)
	}
	if len(in.ExtraTCPPorts) != 4 || in.ExtraTCPPorts[0] != 9000 {
		t.Errorf("input changed: got %v, want it untouched", in.ExtraTCPPorts)
	}
	if want := []Family{FamilyV4, FamilyV6}; !slices.Equal(got.families(), want) {
		t.Errorf("families: got %v, want %v", got.families(), want)
	}
}

func TestChooseMode(t *testing.T) {
	const (
		empty  = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
		kube   = "*nat\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n"
		three  = "*filter\n-A INPUT -j A\n-A INPUT -j B\n-A INPUT -j C\nCOMMIT\n"
		one    = "*filter\n-A INPUT -j A\nCOMMIT\n"
		warned = "# Warning: iptables-legacy tables present, use iptables-legacy-save to see them\n"
	)
	tests := []struct {
		name, legacy, nft string
		want              IPTablesMode
	}{
		{"nothing anywhere", "", "", ModeNFT},
		{"empty tables both", empty, empty, ModeNFT},
		{"only legacy has rules", three, empty + warned, ModeLegacy},
		{"only nft has rules", empty, one, ModeNFT},
		{"legacy has more", three, one, ModeLegacy},
		{"nft has more", one, three, ModeNFT},
		{"equal", one, one, ModeNFT},
		{"nft has kube chains, legacy more rules", three + three, kube, ModeNFT},
		{"legacy has kube chains only", kube + three, "", ModeLegacy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := chooseMode(tc.legacy, tc.nft); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestIPTablesModeFlag: the mode is read through a flag set, so a bad name
// fails when the flag is parsed, saying what to give instead.
func TestIPTablesModeFlag(t *testing.T) {
	for _, tt := range []struct {
		arg     string
		want    IPTablesMode
		wantErr bool
	}{
		{"auto", ModeAuto, false},
		{"nft", ModeNFT, false},
		{"legacy", ModeLegacy, false},
		{"iptables", "", true},
		{"NFT", "", true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var m IPTablesMode
		fs.TextVar(&m, "iptables-mode", ModeAuto, "")
		err := fs.Parse([]string{"--iptables-mode=" + tt.arg})
		if tt.wantErr {
			if err == nil || !strings.Contains(err.Error(), "want auto, nft or legacy") {
				t.Errorf("--iptables-mode=%s: got %v, want an error naming the choices", tt.arg, err)
			}
			continue
		}
		if err != nil || m != tt.want {
			t.Errorf("--iptables-mode=%s: got %q, %v, want %q", tt.arg, m, err, tt.want)
		}
	}
}

func TestIPTablesModeIsFlavour(t *testing.T) {
	for m, want := range map[IPTablesMode]bool{ModeNFT: true, ModeLegacy: true, ModeAuto: false, "": false, "ipvs": false} {
		if got := m.IsFlavour(); got != want {
			t.Errorf("IPTablesMode(%q).IsFlavour() = %v, want %v", m, got, want)
		}
	}
}
