package agent

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/pkg/kubezone"
)

// TestPodAccessIsAChoice: without --watch-pods the agent watches no pod
// (its grant need not list them): autopath and verified pod records are
// off, named in one warning, and the zone answers pod names as disabled;
// with it, all are on.
func TestPodAccessIsAChoice(t *testing.T) {
	args := []string{"--pods", "verified", "--autopath", "--node-name", "node-1"}
	off := mustConfig(t, args...)
	if z := zoneConfig(off); z.Pods != kubezone.PodsDisabled || z.NodeName != "" {
		t.Errorf("zone without --watch-pods: got pods %q, node %q, want disabled and no node (no pod watched)", z.Pods, z.NodeName)
	}
	if serverConfig(off, nil, nil).Autopath {
		t.Errorf("server without --watch-pods: got autopath on, want off")
	}
	note := podAccessNote(off)
	for _, want := range []string{"--watch-pods", "autopath", "--pods=verified", "client IPs", "deploy/overlays/pod-access"} {
		if !strings.Contains(note, want) {
			t.Errorf("the warning %q lacks %q", note, want)
		}
	}
	if n := podAccessNote(mustConfig(t, "--node-name", "node-1")); n != "" {
		t.Errorf("nothing asked for that needs pods: got the warning %q, want none", n)
	}
	on := mustConfig(t, append(args, "--watch-pods")...)
	if z := zoneConfig(on); z.Pods != kubezone.PodsVerified || z.NodeName != "node-1" {
		t.Errorf("zone with --watch-pods: got pods %q, node %q, want verified on node-1", z.Pods, z.NodeName)
	}
	if !serverConfig(on, nil, nil).Autopath || podAccessNote(on) != "" {
		t.Errorf("with --watch-pods: got autopath %v and warning %q, want on and none", serverConfig(on, nil, nil).Autopath, podAccessNote(on))
	}
}

// TestPodNamesNeedWatchPods: an agent without --watch-pods knows no pod of
// its node (top and tail show the client IP); with it, it does.
func TestPodNamesNeedWatchPods(t *testing.T) {
	up := startUpstream(t)
	web1 := netip.MustParseAddr("10.244.1.5") // pod demo/web-1 on node-a in the fixture
	for _, watch := range []bool{false, true} {
		extra := []string{"--node-name", "node-a"}
		if watch {
			extra = append(extra, "--watch-pods")
		}
		a := startAgent(t, testAgentConfig(t, up.Addr, t.TempDir(), freePort(t), extra...))
		p, ok := a.a.zone.PodByIP(web1)
		if ok != watch {
			t.Errorf("--watch-pods=%v: PodByIP(%s) got %+v, %v, want found=%v", watch, web1, p, ok, watch)
		}
	}
}
