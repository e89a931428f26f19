package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/internal/agent/agenttest"
)

// TestRunAndCheckConfigAgree: `nodecache check-config` and `nodecache
// run` accept and refuse the same configs, with the same message, which
// names the --config line to fix. Accepted configs are run for real on
// loopback until they serve.
func TestRunAndCheckConfigAgree(t *testing.T) {
	up := startUpstream(t)
	dir := t.TempDir()
	kubeDNS := filepath.Join(dir, "kube-dns")
	if err := os.Mkdir(kubeDNS, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kubeDNS, "stubDomains"), []byte(`{"acme.local": "10.150.0.1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("10.0.0.1 a.example.internal\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, body string
		want       string // "" accepted; else the error, with FILE for the config's path
	}{
		{"good", "stub-domain:\n  - corp.example=192.0.2.10\nstatic-file:\n  - " + hosts + "\nrewrite-name:\n  - exact a.example b.example\n", ""},
		{"bad stub domain", "stub-domain:\n  - corp.example=192.0.2.10\n  - other.example=not-an-ip\n", "FILE:5: --stub-domain"},
		{"missing static file", "max-ttl: 30s\nstatic-file:\n  - " + filepath.Join(dir, "nope") + "\n", "FILE:5: --static-record/--static-file"},
		{"missing CA", "upstream-tls-ca: " + filepath.Join(dir, "ca.pem") + "\n", "FILE:3: --upstream-tls-ca"},
		{"broken kube-dns ConfigMap", "kube-dns-config-dir: " + kubeDNS + "\n", "FILE:3: --kube-dns-config-dir"},
		{"bad rewrite", "rewrite-name:\n  - regex a b\n", "FILE:4: --rewrite-name"},
		{"metrics on every address", "metrics-addr: 0.0.0.0:9253\n", "FILE:3: --metrics-addr"},
		{"unknown setting", "no-such-thing: 1\n", "FILE:3: --config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "config.yaml")
			body := fmt.Sprintf("# test\nupstream: '%s'\n%s", up.Addr, tt.body)
			if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			args := agenttest.WithoutFlag(agenttest.WithoutFlag(agenttest.WithoutFlag(
				agenttest.Args(t, up.Addr, t.TempDir(), freePort(t)), "--upstream"), "--metrics-addr"), "--fixture")
			args = append(args, "--config", file, "--fixture", agenttest.Fixture())
			checkErr := CheckConfig(args, CheckOptions{})
			want := strings.ReplaceAll(tt.want, "FILE", file)
			switch {
			case want == "" && checkErr != nil:
				t.Fatalf("check-config: got %v, want it accepted", checkErr)
			case want != "" && (checkErr == nil || !strings.HasPrefix(checkErr.Error(), want)):
				t.Fatalf("check-config: got %v, want an error starting %q", checkErr, want)
			}
			cfg, err := ParseConfig(args)
			if err == nil && want == "" {
				startAgent(t, cfg) // fails the test unless it serves
				return
			}
			if err == nil {
				err = newTestAgent(t, cfg).Run(context.Background())
			}
			if err == nil || err.Error() != checkErr.Error() {
				t.Errorf("run: got %v, want check-config's %v", err, checkErr)
			}
		})
	}
}
