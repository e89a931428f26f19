package agent

import (
	"strings"

	"github.com/nodecache/nodecache/pkg/kubezone"
)

// Pod access (--watch-pods). Knowing pods takes list and watch of pods in
// every namespace: RBAC cannot narrow a grant to one node's pods, so the
// token of every agent would read every pod spec of the cluster. The
// agent's default grant holds none, and without --watch-pods the agent
// watches no pod: top and tail show client IPs rather than pod names,
// autopath is off, and --pods=verified answers as disabled (it would need
// every pod of the cluster). deploy/overlays/pod-access grants the list
// and watch and sets the flag. docs/hardening.md weighs the two.

// zonePods is the pod record mode and the node whose pods the zone
// watches, given cfg's pod access.
func zonePods(cfg *Config) (kubezone.PodsMode, string) {
	if cfg.WatchPods {
		return cfg.Pods, cfg.NodeName
	}
	if cfg.Pods == kubezone.PodsVerified {
		return kubezone.PodsDisabled, ""
	}
	return cfg.Pods, ""
}

// autopathOn reports whether autopath runs: it needs the client's pod.
func autopathOn(cfg *Config) bool { return cfg.Autopath && cfg.WatchPods }

// podAccessNote is the one warning that says which features asked for are
// off for want of --watch-pods; empty when none is.
func podAccessNote(cfg *Config) string {
	if cfg.WatchPods {
		return ""
	}
	var off []string
	if cfg.Autopath {
		off = append(off, "autopath")
	}
	if cfg.Pods == kubezone.PodsVerified {
		off = append(off, "--pods=verified (pod names answer NXDOMAIN, as with --pods=disabled)")
	}
	if len(off) == 0 {
		return ""
	}
	return strings.Join(off, " and ") + " off: they need the pods of this node, and --watch-pods is false; " +
		"top and tail show client IPs. To turn them on, grant list and watch of pods (deploy/overlays/pod-access) " +
		"and set --watch-pods"
}
