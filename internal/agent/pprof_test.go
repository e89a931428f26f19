package agent

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/internal/agent/agenttest"
)

// TestPprofOnItsOwnAddress checks that --pprof serves the profiles on
// --pprof-addr (loopback by default) and never on the metrics or health
// listener, which the DaemonSet binds to the node's IP.
func TestPprofOnItsOwnAddress(t *testing.T) {
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := testAgentConfig(t, startUpstream(t).Addr, t.TempDir(), freePort(t), "--pprof", "--pprof-addr", pprofAddr)
	startAgent(t, cfg)
	for _, tt := range []struct {
		addr string
		want int
	}{
		{pprofAddr, http.StatusOK},
		{cfg.MetricsAddr, http.StatusNotFound},
		{cfg.HealthAddr, http.StatusNotFound},
	} {
		resp, err := http.Get("http://" + tt.addr + "/debug/pprof/cmdline")
		if err != nil {
			t.Fatalf("%s: %v", tt.addr, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s/debug/pprof/cmdline: got %d, want %d", tt.addr, resp.StatusCode, tt.want)
		}
	}
}

// TestPprofAddrRefused checks the addresses --pprof-addr refuses, and
// its loopback default.
func TestPprofAddrRefused(t *testing.T) {
	base := agenttest.WithoutFlag(agenttest.WithoutFlag(agenttest.Args(t, addr("127.0.0.1:53"), t.TempDir(), 5300), "--metrics-addr"), "--health-addr")
	base = append(base, "--metrics-addr", "127.0.0.1:9253", "--health-addr", "127.0.0.1:8080", "--pprof")
	cfg, err := ParseConfig(base)
	if err != nil || cfg.PprofAddr != "127.0.0.1:6053" {
		t.Fatalf("default: got %v, error %v; want 127.0.0.1:6053", cfg, err)
	}
	for _, bad := range []string{"0.0.0.0:6053", "[::]:6053", ":6053", "127.0.0.1:9253", "127.0.0.1:8080", "localhost:6053"} {
		if _, err := ParseConfig(append(base, "--pprof-addr", bad)); err == nil || !strings.Contains(err.Error(), "--pprof-addr") {
			t.Errorf("--pprof-addr %s: got %v, want an error naming --pprof-addr", bad, err)
		}
	}
}

// TestPprofAddrOffNotCompared checks that without --pprof the default
// --pprof-addr does not stand in the way of a metrics listener there.
func TestPprofAddrOffNotCompared(t *testing.T) {
	args := agenttest.WithoutFlag(agenttest.Args(t, addr("127.0.0.1:53"), t.TempDir(), 5300), "--metrics-addr")
	if _, err := ParseConfig(append(args, "--metrics-addr", "127.0.0.1:6053")); err != nil {
		t.Errorf("--metrics-addr 127.0.0.1:6053 without --pprof: got %v, want no error", err)
	}
}
