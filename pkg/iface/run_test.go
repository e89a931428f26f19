package iface

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// startRun starts Run in the current synctest bubble and waits for its first pass. stop cancels it and
// checks that it returned nil.
func startRun(t testing.TB, e *env) (ctx context.Context, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.m.Run(ctx) }()
	synctest.Wait()
	return ctx, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: got %v, want nil", err)
		}
	}
}

// TestRunRepairsAddressOnEventAndRulesOnTick runs in a synctest bubble: time only moves when every
// goroutine is blocked, so "repaired without time passing" proves the event path.
func TestRunRepairsAddressOnEventAndRulesOnTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, baseConfig("169.254.20.10", "fd00:20::10"), nil)
		_, stop := startRun(t, e)
		e.assertConverged(t)

		start := time.Now()
		e.links.externalAddrDel(DefaultInterfaceName, "169.254.20.10/32")
		e.rules.set(FamilyV4, "raw", "NODECACHE-PREROUTING")
		synctest.Wait()
		if got := e.links.addrStrings(DefaultInterfaceName); !slices.Contains(got, "169.254.20.10/32") {
			t.Errorf("after the event: got addresses %v, want 169.254.20.10/32 back", got)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("time passed before the address came back: got %v, want 0 (event-driven)", got)
		}
		if got := e.rules.get(FamilyV4, "raw", "NODECACHE-PREROUTING"); len(got) != 0 {
			t.Errorf("rules repaired by a link event: got %d rules, want 0 until the tick", len(got))
		}

		time.Sleep(DefaultSyncInterval)
		synctest.Wait()
		e.assertConverged(t)
		if got := e.readds(kindRule); got != 3 {
			t.Errorf("readds{rule}: got %v, want 3", got)
		}
		if got := e.readds(kindAddress); got != 1 {
			t.Errorf("readds{address}: got %v, want 1", got)
		}

		stop()
		e.links.mu.Lock()
		defer e.links.mu.Unlock()
		if got := len(e.links.watchers); got != 0 {
			t.Errorf("watchers after Run returned: got %d, want 0", got)
		}
	})
}

func TestRunTwiceRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, baseConfig("169.254.20.10"), nil)
		ctx, stop := startRun(t, e)
		if err := e.m.Run(ctx); err == nil {
			t.Error("second concurrent Run: got nil, want an error")
		}
		stop()
	})
}

func TestTeardownStopsRunFromRestoring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, baseConfig("169.254.20.10"), nil)
		ctx, stop := startRun(t, e)
		if err := e.m.Teardown(ctx); err != nil {
			t.Fatalf("Teardown: %v", err)
		}
		time.Sleep(2 * DefaultSyncInterval)
		synctest.Wait()
		if l, _ := e.links.LinkByName(DefaultInterfaceName); l != nil {
			t.Error("link after Teardown and two ticks: got present, want absent")
		}
		stop()
	})
}

func TestDummyUnsupportedFallsBackToBridge(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10", "fd00:20::10"), func(e *env) { e.links.noDummy = true })
	e.setup(t)
	e.assertConverged(t)
	l, _ := e.links.LinkByName(DefaultInterfaceName)
	if got := l.Type(); got != "bridge" {
		t.Errorf("link kind: got %s, want bridge", got)
	}
	e.links.externalLinkDel(DefaultInterfaceName)
	e.setup(t)
	e.assertConverged(t)
	if got := e.logs.count(slog.LevelWarn, "dummy"); got != 1 {
		t.Errorf("warnings about dummy: got %d, want 1", got)
	}
	if got := e.logs.count(slog.LevelWarn, ""); got != 1 {
		t.Errorf("warnings in all: got %d, want 1", got)
	}
	adds := slices.DeleteFunc(e.ops.snapshot(), func(op string) bool { return !strings.HasPrefix(op, "link:add ") })
	if want := []string{"link:add bridge nct-nodelocaldn", "link:add bridge nct-nodelocaldn"}; !slices.Equal(adds, want) {
		t.Errorf("link adds: got %v, want %v (no second dummy attempt)", adds, want)
	}
}

func TestAdoptExistingLink(t *testing.T) {
	for _, kind := range []string{"dummy", "bridge"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, baseConfig("169.254.20.10"), func(e *env) {
				e.links.noDummy = kind == "bridge"
				e.links.addExisting(newLinkOfKind(kind, DefaultInterfaceName))
			})
			e.setup(t)
			e.assertConverged(t)
			if l, _ := e.links.LinkByName(DefaultInterfaceName); l.Type() != kind {
				t.Errorf("kind: got %s, want %s (adopted)", l.Type(), kind)
			}
			if got := e.logs.count(slog.LevelWarn, ""); got != 0 {
				t.Errorf("warnings: got %d, want 0", got)
			}
		})
	}
}

func TestForeignLinkIsLeftAlone(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10"), func(e *env) {
		e.links.addExisting(newLinkOfKind("veth", DefaultInterfaceName))
	})
	if err := e.m.Setup(context.Background()); !errors.Is(err, ErrForeignLink) {
		t.Errorf("Setup: got %v, want ErrForeignLink", err)
	}
	if got := e.errs(kindLink); got != 1 {
		t.Errorf("errors{link}: got %v, want 1", got)
	}
	if err := e.m.Teardown(context.Background()); !errors.Is(err, ErrForeignLink) {
		t.Errorf("Teardown: got %v, want ErrForeignLink", err)
	}
	if l, _ := e.links.LinkByName(DefaultInterfaceName); l == nil || l.Type() != "veth" {
		t.Error("foreign link: got deleted or changed, want it left alone")
	}
	if st := e.m.Status(); st.LastError == "" || st.Counts.ReconcileErrs != 1 {
		t.Errorf("status: got LastError=%q errs=%d, want the error recorded once", st.LastError, st.Counts.ReconcileErrs)
	}
}

func TestDisabledPartsTouchNothing(t *testing.T) {
	tests := []struct {
		name             string
		iface, iptables  bool
		wantIf, wantRule string
		opPrefixAllowed  string
	}{
		{"both disabled", false, false, StateDisabled, StateDisabled, "none"},
		{"interface only", true, false, StateOK, StateDisabled, "link:"},
		{"iptables only", false, true, StateDisabled, StateOK, "rules:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig("169.254.20.10", "fd00:20::10")
			cfg.SetupInterface, cfg.SetupIPTables = tc.iface, tc.iptables
			e := newEnv(t, cfg, nil)
			e.setup(t)
			st, err := e.m.Check(context.Background())
			if err != nil {
				t.Errorf("Check: got %v, want nil", err)
			}
			if st.Interface.State != tc.wantIf || st.Rules.State != tc.wantRule {
				t.Errorf("states: got interface=%s rules=%s, want %s and %s", st.Interface.State, st.Rules.State, tc.wantIf, tc.wantRule)
			}
			if !tc.iptables && st.Rules.Backend != StateDisabled {
				t.Errorf("backend: got %q, want disabled", st.Rules.Backend)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := e.m.Run(ctx); err != nil {
				t.Errorf("Run: got %v, want nil", err)
			}
			if err := e.m.Teardown(context.Background()); err != nil {
				t.Errorf("Teardown: got %v, want nil", err)
			}
			for _, op := range e.ops.snapshot() {
				if !strings.HasPrefix(op, tc.opPrefixAllowed) {
					t.Errorf("got op %q, want only %q ops", op, tc.opPrefixAllowed)
				}
			}
		})
	}
}

func TestRuleBackendErrors(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10"), func(e *env) {
		e.rules.fail = errors.New("exit status 4: Another app is currently holding the xtables lock. Stopped waiting after 5s.")
	})
	err := e.m.Setup(context.Background())
	if err == nil || !strings.Contains(err.Error(), "holding the xtables lock") {
		t.Fatalf("Setup: got %v, want the backend error wrapped", err)
	}
	if got := e.errs(kindRule); got != 4 {
		t.Errorf("errors{rule}: got %v, want 4 (one per chain)", got)
	}
	if got := e.errs(kindJump); got != 4 {
		t.Errorf("errors{jump}: got %v, want 4", got)
	}
	// node-cache (kubernetes/dns cmd/node-cache/app/cache_app.go) counts
	// an iptables error whose text says the xtables lock is held as
	// iptables_lock, any other as iptables.
	if got := testutil.ToFloat64(e.m.met.setupErrors.WithLabelValues("iptables_lock")); got != 8 {
		t.Errorf("coredns_nodecache_setup_errors_total{errortype=iptables_lock}: got %v, want 8 (rules and jumps)", got)
	}
	if got := testutil.ToFloat64(e.m.met.setupErrors.WithLabelValues("iptables")); got != 0 {
		t.Errorf("coredns_nodecache_setup_errors_total{errortype=iptables}: got %v, want 0 (every error was the lock's)", got)
	}
	if got := e.links.addrStrings(DefaultInterfaceName); !slices.Equal(got, []string{"169.254.20.10/32"}) {
		t.Errorf("addresses despite rule errors: got %v, want the local IP", got)
	}
	e.rules.mu.Lock()
	e.rules.fail = nil
	e.rules.mu.Unlock()
	e.setup(t)
	e.assertConverged(t)
	if st := e.m.Status(); st.LastError != "" || st.Counts.Reconciles != 2 || st.Counts.ReconcileErrs != 1 {
		t.Errorf("status: got %+v, want cleared error after 2 reconciles, 1 failed", st.Counts)
	}
	if got := e.readds(kindRule); got != 0 {
		t.Errorf("readds{rule}: got %v, want 0 (first success is the initial setup)", got)
	}
}

func TestAddressErrorsCounted(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10", "fd00:20::10"), func(e *env) { e.links.failAdd = errors.New("permission denied") })
	if err := e.m.Setup(context.Background()); err == nil {
		t.Fatal("Setup: got nil, want an error")
	}
	if got := e.errs(kindAddress); got != 2 {
		t.Errorf("errors{address}: got %v, want 2", got)
	}
	if got := testutil.ToFloat64(e.m.met.setupErrors.WithLabelValues("interface_add")); got != 2 {
		t.Errorf("coredns_nodecache_setup_errors_total{errortype=interface_add}: got %v, want 2", got)
	}
	if st := e.m.Status(); st.Interface.State != StateDrift || len(st.Interface.Missing) != 2 {
		t.Errorf("interface status: got %s missing %v, want drift with 2 missing", st.Interface.State, st.Interface.Missing)
	}
}

// TestSetupErrorTypesAreNodeCaches: the five errortype values of
// node-cache's coredns_nodecache_setup_errors_total (kubernetes/dns
// cmd/node-cache/app/metrics.go, registerMetrics) exist at 0 from the
// start, so alerts written for node-cache find their series.
func TestSetupErrorTypesAreNodeCaches(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10"), nil)
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		if mf.GetName() != "coredns_nodecache_setup_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got = append(got, m.GetLabel()[0].GetValue())
		}
	}
	want := []string{"configmap", "interface_add", "interface_check", "iptables", "iptables_lock"}
	if !slices.Equal(got, want) {
		t.Errorf("errortype values: got %v, want %v", got, want)
	}
}
