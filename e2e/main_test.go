//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// suiteEnv is what TestMain sets up once for every test of the binary.
// It is written only by TestMain, before any test runs.
type suiteEnv struct {
	api     *apiServer    // nil when unavailable; see skipReason
	agent   agentIdentity // the ServiceAccount of deploy/base/rbac.yaml
	workDir string        // removed after the tests
	// skipReason says why the suite cannot run here; empty when it can.
	skipReason string
}

var env suiteEnv

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nodecache-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: creating work dir: %v\n", err)
		return 1
	}
	env.workDir = dir
	keep := false
	defer func() {
		if !keep {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := setUp(dir); err != nil {
		env.skipReason = err.Error()
		fmt.Fprintf(os.Stderr, "\n*** e2e: SUITE CANNOT RUN: %s ***\n\n", env.skipReason)
	}
	code := m.Run()
	if env.api != nil {
		if err := env.api.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			code = 1
		}
	}
	if code != 0 && env.api != nil {
		keep = true
		fmt.Fprintf(os.Stderr, "e2e: failed; apiserver and etcd logs kept in %s\n", dir)
	}
	return code
}

// setUp checks the prerequisites and starts the apiserver.
func setUp(dir string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root (uid %d): network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN", os.Geteuid())
	}
	binDir, err := apiServerBinDir()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	api, err := startAPIServer(ctx, binDir, dir)
	if err != nil {
		return fmt.Errorf("starting the apiserver: %w", err)
	}
	env.api = api
	fmt.Fprintf(os.Stderr, "e2e: etcd + kube-apiserver ready at %s in %v\n", api.URL, api.StartUp.Round(time.Millisecond))
	if err := dummySupported(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: kernel has no dummy links (%v): the agent falls back to a bridge\n", err)
	}
	if env.agent, err = applyRBACManifest(ctx, api.Admin, rbacManifest); err != nil {
		return fmt.Errorf("applying %s: %w", rbacManifest, err)
	}
	return nil
}

// requireSuite skips t (or fails it under CI=true) when the suite cannot run
// here. Every test calls it first.
func requireSuite(t testing.TB) {
	t.Helper()
	if env.skipReason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("e2e suite cannot run and CI=true forbids skipping: %s", env.skipReason)
	}
	t.Skipf("SKIPPING e2e (set CI=true to make this a failure): %s", env.skipReason)
}
