package supervise

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSmallEnoughToTrust: the supervisor parses no DNS and talks to no API
// server, and its imports say so: none of the packages that do, directly
// or through another, nor Prometheus; its binary (cmd/nodecache-supervisor)
// neither, so that none of their package initialisation is in its memory.
func TestSmallEnoughToTrust(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "../../cmd/nodecache-supervisor").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/miekg/dns", "k8s.io/", "github.com/nodecache/nodecache/pkg/wire",
			"github.com/nodecache/nodecache/pkg/server", "github.com/nodecache/nodecache/pkg/cache",
			"github.com/nodecache/nodecache/internal/agent", "github.com/prometheus/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("internal/supervise depends on %s: got it, want none of %s", dep, banned)
			}
		}
	}
}
