package agent

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/pkg/kubezone"
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

// A process restarted on the supervisor's sockets reads them before its
// zone has listed, unless a rewrite rule could send a name to the zone; a
// successor of an upgrade, or a process on new sockets, does not.
func TestReadsBeforeZone(t *testing.T) {
	zone := &kubezone.Zone{}
	for _, c := range []struct {
		kept     bool
		zone     *kubezone.Zone
		rewrites []string
		want     bool
	}{
		{kept: true, zone: zone, want: true},
		{kept: true, zone: zone, rewrites: []string{"exact db.example.com db.prod.svc.cluster.local"}},
		{kept: true},
		{zone: zone},
	} {
		a := &Agent{cfg: &Config{RewriteNames: c.rewrites}, keptSockets: c.kept, zone: c.zone}
		if got := a.readsBeforeZone(); got != c.want {
			t.Errorf("kept %v, zone %v, rewrites %q: %v, want %v", c.kept, c.zone != nil, c.rewrites, got, c.want)
		}
	}
}
