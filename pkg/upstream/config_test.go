package upstream

import (
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestConfigValidate(t *testing.T) {
	agent := aps(t, "169.254.20.10:53", "[fd00::10]:53")
	base := func() Config { return Config{Servers: aps(t, "10.0.0.10:53"), LocalAddrs: agent} }
	tests := []struct {
		name    string
		edit    func(c *Config)
		wantErr string
	}{
		{name: "minimal", edit: func(*Config) {}},
		{name: "all set", edit: func(c *Config) {
			c.Policy, c.TryTimeout, c.Deadline = PolicyRoundRobin, time.Second, 3*time.Second
			c.StubDomains = map[string][]netip.AddrPort{"corp.example.": aps(t, "10.1.0.1:53")}
		}},
		{name: "no servers", edit: func(c *Config) { c.Servers = nil }, wantErr: "no upstream servers configured; set --upstream"},
		{name: "zero port", edit: func(c *Config) { c.Servers = aps(t, "10.0.0.1:0") }, wantErr: "is not a usable IP:port"},
		{name: "invalid addr", edit: func(c *Config) { c.Servers = []netip.AddrPort{{}} }, wantErr: "is not a usable IP:port"},
		{name: "unknown policy", edit: func(c *Config) { c.Policy = "fastest" }, wantErr: `unknown upstream policy "fastest" (want sequential, random or round_robin)`},
		{name: "negative timeout", edit: func(c *Config) { c.TryTimeout = -time.Second }, wantErr: "try timeout is negative"},
		{name: "negative limit", edit: func(c *Config) { c.MaxInFlight = -1 }, wantErr: "must not be negative"},
		{
			name:    "loop: agent address",
			edit:    func(c *Config) { c.Servers = aps(t, "10.0.0.10:53", "169.254.20.10:53") },
			wantErr: "upstream 169.254.20.10:53 is the agent's own address (forwarding loop); set --upstream",
		},
		{
			name:    "loop: agent IPv6 address",
			edit:    func(c *Config) { c.Servers = aps(t, "[fd00::10]:53") },
			wantErr: "upstream [fd00::10]:53 is the agent's own address (forwarding loop)",
		},
		{name: "agent address on another port", edit: func(c *Config) { c.Servers = aps(t, "169.254.20.10:5353") }},
		{
			name: "loop: systemd-resolved stub listed as local",
			edit: func(c *Config) {
				c.Servers = aps(t, "127.0.0.53:53")
				c.LocalAddrs = append(c.LocalAddrs, netip.MustParseAddrPort("127.0.0.53:53"))
			},
			wantErr: "upstream 127.0.0.53:53 is the agent's own address",
		},
		{name: "loopback stub not local", edit: func(c *Config) { c.Servers = aps(t, "127.0.0.53:53") }},
		{
			name: "loop: loopback behind wildcard listener",
			edit: func(c *Config) {
				c.Servers = aps(t, "127.0.0.1:53")
				c.LocalAddrs = aps(t, "0.0.0.0:53")
			},
			wantErr: "forwarding loop",
		},
		{
			name: "loop: in a stub domain",
			edit: func(c *Config) {
				c.StubDomains = map[string][]netip.AddrPort{"corp.example.": aps(t, "169.254.20.10:53")}
			},
			wantErr: "upstream 169.254.20.10:53 is the agent's own address",
		},
		{
			name:    "stub without servers",
			edit:    func(c *Config) { c.StubDomains = map[string][]netip.AddrPort{"corp.example.": nil} },
			wantErr: "stub domain corp.example. has no servers",
		},
		{
			name:    "stub not canonical",
			edit:    func(c *Config) { c.StubDomains = map[string][]netip.AddrPort{"Corp.Example": aps(t, "10.1.0.1:53")} },
			wantErr: "must be a lowercased FQDN",
		},
		{
			name:    "root stub",
			edit:    func(c *Config) { c.StubDomains = map[string][]netip.AddrPort{".": aps(t, "10.1.0.1:53")} },
			wantErr: "must not be the root",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	got := (Config{Servers: aps(t, "10.0.0.10:53")}).withDefaults()
	want := Config{
		Servers:        aps(t, "10.0.0.10:53"),
		Policy:         PolicyRandom,
		TryTimeout:     2 * time.Second,
		Deadline:       5 * time.Second,
		MaxInFlight:    1000,
		FailThreshold:  3,
		ProbeInterval:  time.Second,
		TCPIdleTimeout: 10 * time.Second,
		TCPMaxIdle:     8,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
}

func TestNewRejects(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	good := Config{Servers: aps(t, "10.0.0.10:53")}
	loop := Config{Servers: aps(t, "169.254.20.10:53"), LocalAddrs: aps(t, "169.254.20.10:53")}
	tests := []struct {
		name    string
		cfg     Config
		reg     prometheus.Registerer
		log     *slog.Logger
		wantErr string
	}{
		{"loop", loop, prometheus.NewRegistry(), log, "forwarding loop"},
	}
	for _, tt := range tests {
		f, err := New(tt.cfg, tt.reg, tt.log)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
		if f != nil {
			_ = f.Close()
		}
	}

	// Registering twice on one registry fails cleanly.
	reg := prometheus.NewRegistry()
	f, err := New(good, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if _, err := New(good, reg, log); err == nil || !strings.Contains(err.Error(), "registering upstream metrics") {
		t.Errorf("second New on one registry: got %v, want a registration error", err)
	}
}
