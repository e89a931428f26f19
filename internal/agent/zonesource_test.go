package agent

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestFixtureZoneSource checks that an agent serving the zone from
// --fixture says so, in its status and in /readyz, instead of naming the
// API server.
func TestFixtureZoneSource(t *testing.T) {
	up := startUpstream(t)
	cfg := testAgentConfig(t, up.Addr, t.TempDir(), freePort(t))
	if cfg.Fixture == "" {
		t.Fatal("testAgentConfig gives no --fixture")
	}
	a := startAgent(t, cfg).agent()
	if st := a.status(); st.Zone == nil || st.Zone.Source != "fixture" {
		t.Errorf("status: got zone %+v, want source fixture", st.Zone)
	}
	resp, err := http.Get("http://" + cfg.HealthAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "zone source fixture") {
		t.Errorf("/readyz: got %q, want it to name the zone source fixture", body)
	}
}
