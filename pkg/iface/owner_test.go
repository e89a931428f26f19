package iface

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestLinkOwnership: a link of the configured name is adopted only when it is nodecache's (our
// alias, or, left by a version before the alias, nothing but our host addresses); any other is
// refused at Setup and left exactly as it was by Setup and Teardown.
func TestLinkOwnership(t *testing.T) {
	tests := []struct {
		name  string
		kind  string
		alias string
		addrs []string
		ours  bool
	}{
		{"ours, marked", "dummy", linkAlias, []string{"169.254.20.10/32"}, true},
		{"ours, marked, empty", "bridge", linkAlias, nil, true},
		{"earlier version: our address only", "dummy", "", []string{"169.254.20.10/32", "10.96.0.99/32"}, true},
		{"earlier version: bridge with our address", "bridge", "", []string{"169.254.20.10/32"}, true},
		{"cni bridge with a gateway /24", "bridge", "", []string{"10.244.0.1/24"}, false},
		{"cni bridge also carrying our IP", "bridge", "", []string{"10.244.0.1/24", "169.254.20.10/32"}, false},
		{"empty unmarked bridge", "bridge", "", nil, false},
		{"someone else's alias", "dummy", "kube-ipvs", []string{"169.254.20.10/32"}, false},
		{"host address that is not ours", "dummy", "", []string{"10.0.0.5/32"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig("169.254.20.10")
			cfg.InterfaceName = "cni0"
			e := newEnv(t, cfg, func(e *env) {
				l := newLinkOfKind(tc.kind, "cni0")
				l.Attrs().Alias = tc.alias
				e.links.addExisting(l)
				for _, a := range tc.addrs {
					e.links.externalAddrAdd("cni0", a)
				}
			})
			before := e.links.addrStrings("cni0")
			err := e.m.Setup(context.Background())
			if !tc.ours {
				if !errors.Is(err, ErrForeignLink) {
					t.Fatalf("Setup: got %v, want ErrForeignLink", err)
				}
				if err := e.m.Teardown(context.Background()); !errors.Is(err, ErrForeignLink) {
					t.Errorf("Teardown: got %v, want ErrForeignLink", err)
				}
				l, _ := e.links.LinkByName("cni0")
				if l == nil || l.Attrs().Alias != tc.alias || l.Attrs().Flags != 0 {
					t.Fatalf("foreign link after Setup and Teardown: got %+v, want it untouched", l)
				}
				if got := e.links.addrStrings("cni0"); !slices.Equal(got, before) {
					t.Errorf("foreign link's addresses: got %v, want %v untouched", got, before)
				}
				return
			}
			if err != nil {
				t.Fatalf("Setup: got %v, want nil (adopted)", err)
			}
			e.assertConverged(t)
			if l, _ := e.links.LinkByName("cni0"); l.Attrs().Alias != linkAlias {
				t.Errorf("alias after adoption: got %q, want %q", l.Attrs().Alias, linkAlias)
			}
		})
	}
}

// TestCreatedLinkIsMarked: the link Setup creates carries our alias, dummy or bridge fallback.
func TestCreatedLinkIsMarked(t *testing.T) {
	for _, noDummy := range []bool{false, true} {
		e := newEnv(t, baseConfig("169.254.20.10"), func(e *env) { e.links.noDummy = noDummy })
		e.setup(t)
		l, _ := e.links.LinkByName(DefaultInterfaceName)
		if got := l.Attrs().Alias; got != linkAlias {
			t.Errorf("noDummy=%v: alias of the created %s: got %q, want %q", noDummy, l.Type(), got, linkAlias)
		}
	}
}

// TestLinkIsMarkedBeforeItHasItsName: the kernel ignores an alias given at
// creation, so the link is created under a temporary name, marked, then
// renamed; a link left under the temporary name by a crash in between is
// removed, and one that is not empty there is refused.
func TestLinkIsMarkedBeforeItHasItsName(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10"), func(e *env) {
		e.links.addExisting(newLinkOfKind("bridge", "nct-nodelocaldn")) // a crash between add and rename
		l, _ := e.links.LinkByName("nct-nodelocaldn")
		l.Attrs().Alias = ""
	})
	e.setup(t)
	e.assertConverged(t)
	var linkOps []string
	for _, op := range e.ops.snapshot() {
		if strings.HasPrefix(op, "link:") && !strings.HasPrefix(op, "link:addr") && !strings.HasPrefix(op, "link:up") {
			linkOps = append(linkOps, op)
		}
	}
	want := []string{"link:del nct-nodelocaldn", "link:add dummy nct-nodelocaldn",
		"link:alias nct-nodelocaldn nodecache", "link:rename nct-nodelocaldn nodelocaldns"}
	if !slices.Equal(linkOps, want) {
		t.Errorf("link operations: got %v, want %v", linkOps, want)
	}
	if l, _ := e.links.LinkByName("nct-nodelocaldn"); l != nil {
		t.Error("temporary link after Setup: got present, want removed")
	}

	e2 := newEnv(t, baseConfig("169.254.20.10"), func(e *env) {
		e.links.addExisting(newLinkOfKind("bridge", "nct-nodelocaldn"))
		e.links.externalAddrAdd("nct-nodelocaldn", "10.244.0.1/24")
	})
	if err := e2.m.Setup(context.Background()); !errors.Is(err, ErrForeignLink) {
		t.Errorf("Setup with an addressed link at the temporary name: got %v, want ErrForeignLink", err)
	}
	if l, _ := e2.links.LinkByName("nct-nodelocaldn"); l == nil {
		t.Error("addressed link at the temporary name: got deleted, want left alone")
	}
}
