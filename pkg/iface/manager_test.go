package iface

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func stacks() []struct {
	name string
	ips  []string
} {
	return []struct {
		name string
		ips  []string
	}{
		{"v4", []string{"169.254.20.10"}},
		{"v4 with cluster IP", []string{"169.254.20.10", "10.96.0.10"}},
		{"v6", []string{"fd00:20::10"}},
		{"dual-stack", []string{"169.254.20.10", "10.96.0.10", "fd00:20::10", "fd00:96::a"}},
	}
}

func TestSetupEndState(t *testing.T) {
	for _, tc := range stacks() {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, baseConfig(tc.ips...), nil)
			e.setup(t)
			e.assertConverged(t)
			st, err := e.m.Check(context.Background())
			if err != nil {
				t.Fatalf("Check: got %v, want nil", err)
			}
			if !st.Converged() || st.Interface.Kind != "dummy" {
				t.Errorf("status: got converged=%t kind=%q, want true and dummy", st.Converged(), st.Interface.Kind)
			}
			for _, ip := range e.cfg.LocalIPs {
				cidr, want := ip.String()+"/32", 0
				if ip.Is6() {
					cidr, want = ip.String()+"/128", ifaFNoDAD
				}
				if got := e.links.addrFlags(DefaultInterfaceName, cidr); got != want {
					t.Errorf("flags of %s: got %#x, want %#x", cidr, got, want)
				}
			}
		})
	}
}

func TestSetupLiteralRules(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10", "fd00:20::10"), nil)
	e.setup(t)
	c := " -m comment --comment nodecache -j "
	want := []struct {
		fam          Family
		table, chain string
		rule         string
	}{
		{FamilyV4, "raw", "NODECACHE-PREROUTING", "-d 169.254.20.10/32 -p udp -m udp --dport 53" + c + "NOTRACK"},
		{FamilyV4, "raw", "NODECACHE-OUTPUT", "-d 169.254.20.10/32 -p tcp -m tcp --dport 53" + c + "NOTRACK"},
		{FamilyV4, "raw", "NODECACHE-OUTPUT", "-s 169.254.20.10/32 -p udp -m udp --sport 53" + c + "NOTRACK"},
		{FamilyV4, "filter", "NODECACHE-INPUT", "-d 169.254.20.10/32 -p tcp -m tcp --dport 8080" + c + "ACCEPT"},
		{FamilyV4, "filter", "NODECACHE-OUTPUT", "-s 169.254.20.10/32 -p udp -m udp --sport 53" + c + "ACCEPT"},
		{FamilyV6, "raw", "NODECACHE-PREROUTING", "-d fd00:20::10/128 -p udp -m udp --dport 53" + c + "NOTRACK"},
		{FamilyV6, "filter", "NODECACHE-OUTPUT", "-s fd00:20::10/128 -p tcp -m tcp --sport 8080" + c + "ACCEPT"},
	}
	for _, w := range want {
		rules := e.rules.get(w.fam, w.table, w.chain)
		if got := strings.Count(joinLines(rules)+"\n", w.rule+"\n"); got != 1 {
			t.Errorf("%s %s/%s: got %d copies of %q, want 1", w.fam, w.table, w.chain, got, w.rule)
		}
	}
	for _, r := range e.rules.get(FamilyV4, "filter", "NODECACHE-INPUT") {
		if strings.Contains(r, "udp --dport 8080") {
			t.Errorf("got extra port rule %q for udp, want tcp only", r)
		}
	}
}

func TestSetupIdempotent(t *testing.T) {
	for _, tc := range stacks() {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, baseConfig(tc.ips...), nil)
			e.setup(t)
			before, ops := e.rules.dump(), len(e.ops.snapshot())
			e.setup(t)
			e.setup(t)
			if got := e.rules.dump(); got != before {
				t.Errorf("rules after Setup x3:\n%s\nwant as after the first:\n%s", got, before)
			}
			if got := e.ops.snapshot()[ops:]; len(got) != 0 {
				t.Errorf("second and third Setup: got changes %v, want none", got)
			}
			e.assertConverged(t)
			for _, k := range []string{kindLink, kindAddress, kindRule, kindJump} {
				if got := e.readds(k); got != 0 {
					t.Errorf("readds{%s}: got %v, want 0", k, got)
				}
			}
		})
	}
}

func TestRepair(t *testing.T) {
	const name = DefaultInterfaceName
	jump := func(c string) string { return "-m comment --comment nodecache -j " + c }
	tests := []struct {
		name      string
		damage    func(e *env)
		readdKind string
		readds    float64
	}{
		{"flushed chain", func(e *env) { e.rules.set(FamilyV4, "raw", "NODECACHE-PREROUTING") }, kindRule, 3},
		{"flushed chain v6", func(e *env) { e.rules.set(FamilyV6, "filter", "NODECACHE-INPUT") }, kindRule, 3},
		{"one rule deleted", func(e *env) {
			r := e.rules.get(FamilyV4, "raw", "NODECACHE-OUTPUT")
			e.rules.set(FamilyV4, "raw", "NODECACHE-OUTPUT", r[1:]...)
		}, kindRule, 1},
		{"stale rule added", func(e *env) {
			r := e.rules.get(FamilyV4, "filter", "NODECACHE-INPUT")
			e.rules.set(FamilyV4, "filter", "NODECACHE-INPUT", append(r, "-d 10.0.0.1/32 -j ACCEPT")...)
		}, kindRule, 0},
		{"jump removed", func(e *env) { e.rules.set(FamilyV4, "filter", "INPUT", "-j KUBE-FIREWALL") }, kindJump, 1},
		{"jump moved last", func(e *env) {
			e.rules.set(FamilyV4, "filter", "INPUT", "-j KUBE-FIREWALL", jump("NODECACHE-INPUT"))
		}, kindJump, 0},
		{"jump duplicated", func(e *env) {
			e.rules.set(FamilyV6, "raw", "OUTPUT", jump("NODECACHE-OUTPUT"), "-j CT", jump("NODECACHE-OUTPUT"))
		}, kindJump, 0},
		{"all rules flushed", func(e *env) {
			for _, fam := range []Family{FamilyV4, FamilyV6} {
				for table, chains := range builtinChains() {
					for _, c := range chains {
						e.rules.set(fam, table, c)
					}
				}
			}
		}, kindJump, 8},
		{"address deleted", func(e *env) { e.links.externalAddrDel(name, "169.254.20.10/32") }, kindAddress, 1},
		{"address with wrong prefix", func(e *env) {
			e.links.externalAddrDel(name, "fd00:20::10/128")
			e.links.externalAddrAdd(name, "fd00:20::10/64")
		}, kindAddress, 1},
		{"link down", func(e *env) { e.links.externalLinkDown(name) }, kindLink, 0},
		{"link deleted", func(e *env) { e.links.externalLinkDel(name) }, kindLink, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, baseConfig("169.254.20.10", "fd00:20::10"), nil)
			e.setup(t)
			tc.damage(e)
			if _, err := e.m.Check(context.Background()); !errors.Is(err, ErrNotConverged) {
				t.Errorf("Check after breaking: got %v, want ErrNotConverged", err)
			}
			e.setup(t)
			e.assertConverged(t)
			if got := e.readds(tc.readdKind); got != tc.readds {
				t.Errorf("readds{%s}: got %v, want %v", tc.readdKind, got, tc.readds)
			}
			if _, err := e.m.Check(context.Background()); err != nil {
				t.Errorf("Check after repair: got %v, want nil", err)
			}
		})
	}
}

func TestAdoptPredecessorLeftovers(t *testing.T) {
	cfg := baseConfig("169.254.20.10", "10.96.0.10", "fd00:20::10")
	var predecessor string
	e := newEnv(t, cfg, func(e *env) {
		// A killed predecessor (run twice, with a different ClusterIP) left duplicates and stale state.
		old, err := NewWithBackends(baseConfig("169.254.20.10", "10.96.0.99", "fd00:20::10"),
			e.links, e.rules, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Setup(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, fam := range []Family{FamilyV4, FamilyV6} {
			for _, ref := range ourChains() {
				r := e.rules.get(fam, ref.Table, ref.Chain)
				e.rules.set(fam, ref.Table, ref.Chain, append(r, r...)...)
				p := e.rules.get(fam, ref.Table, ref.Parent)
				e.rules.set(fam, ref.Table, ref.Parent, append([]string{"-j KUBE-X"}, append(p, p...)...)...)
			}
		}
		predecessor = e.rules.dump()
	})
	if !strings.Contains(predecessor, "10.96.0.99") {
		t.Fatalf("predecessor state lacks its stale IP:\n%s", predecessor)
	}
	e.setup(t)
	e.assertConverged(t)
	if got := e.rules.dump(); strings.Contains(got, "10.96.0.99") {
		t.Errorf("got stale rules of 10.96.0.99 after adoption:\n%s", got)
	}
	if got := e.links.addrStrings(DefaultInterfaceName); slices.Contains(got, "10.96.0.99/32") {
		t.Errorf("addresses: got stale 10.96.0.99 in %v, want it removed", got)
	}
	for _, fam := range []Family{FamilyV4, FamilyV6} {
		if got := e.rules.get(fam, "filter", "INPUT"); !slices.Contains(got, "-j KUBE-X") {
			t.Errorf("%s filter/INPUT: got %v, want foreign rule kept", fam, got)
		}
	}
	adds := slices.DeleteFunc(e.ops.snapshot(), func(op string) bool { return !strings.HasPrefix(op, "link:add ") })
	if len(adds) != 1 {
		t.Errorf("link adds: got %v, want only the predecessor's", adds)
	}
}

func TestTeardownOrder(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10", "fd00:20::10"), nil)
	e.setup(t)
	start := len(e.ops.snapshot())
	if err := e.m.Teardown(context.Background()); err != nil {
		t.Fatalf("Teardown: got %v, want nil", err)
	}
	ops := e.ops.snapshot()[start:]
	rank := func(op string) int {
		switch {
		case strings.HasPrefix(op, "rules:edit"):
			return 0
		case strings.HasPrefix(op, "rules:delete-chain"):
			return 1
		case strings.HasPrefix(op, "link:addr-del"):
			return 2
		case strings.HasPrefix(op, "link:del"):
			return 3
		}
		return -1
	}
	if !slices.IsSortedFunc(ops, func(a, b string) int { return rank(a) - rank(b) }) || slices.ContainsFunc(ops, func(op string) bool { return rank(op) < 0 }) {
		t.Errorf("teardown ops:\n%s\nwant jumps, then chains, then addresses, then the link", joinLines(ops))
	}
	for r, want := range []int{8, 8, 2, 1} {
		if got := len(slices.DeleteFunc(slices.Clone(ops), func(op string) bool { return rank(op) != r })); got != want {
			t.Errorf("ops of rank %d: got %d, want %d", r, got, want)
		}
	}
	if got := e.rules.count(FamilyV4) + e.rules.count(FamilyV6); got != 0 {
		t.Errorf("rules left: got %d, want 0", got)
	}
	if l, _ := e.links.LinkByName(DefaultInterfaceName); l != nil {
		t.Errorf("link left: got %s, want none", l.Attrs().Name)
	}
	again := len(e.ops.snapshot())
	if err := e.m.Teardown(context.Background()); err != nil {
		t.Errorf("second Teardown: got %v, want nil", err)
	}
	if got := e.ops.snapshot()[again:]; len(got) != 0 {
		t.Errorf("second Teardown: got ops %v, want none", got)
	}
}

func TestSetupRemovesRulesOfAFamilyWithoutLocalIPs(t *testing.T) {
	var predecessor string
	e := newEnv(t, baseConfig("169.254.20.10"), func(e *env) {
		// A predecessor ran dual-stack; this agent is v4 only.
		old, err := NewWithBackends(baseConfig("169.254.20.10", "fd00:20::10"),
			e.links, e.rules, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Setup(context.Background()); err != nil {
			t.Fatal(err)
		}
		predecessor = e.rules.dump()
	})
	if !strings.Contains(predecessor, "fd00:20::10") {
		t.Fatalf("predecessor state lacks its v6 rules:\n%s", predecessor)
	}
	e.setup(t)
	e.assertConverged(t)
	for _, ref := range ourChains() {
		if _, exists, _ := e.rules.ListRules(FamilyV6, ref.Table, ref.Chain); exists {
			t.Errorf("v6 %s/%s: still there after setup without v6 local IPs", ref.Table, ref.Chain)
		}
		for _, r := range e.rules.get(FamilyV6, ref.Table, ref.Parent) {
			if strings.Contains(r, ref.Chain) {
				t.Errorf("v6 %s/%s: jump %q left", ref.Table, ref.Parent, r)
			}
		}
	}
	if got := e.rules.dump(); strings.Contains(got, "fd00:20::10") {
		t.Errorf("got v6 rules after setup:\n%s", got)
	}
	if n := e.logs.count(slog.LevelInfo, "family without local IPs"); n != 1 {
		t.Errorf("log lines about the stale family: got %d, want 1", n)
	}
}
