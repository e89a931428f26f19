package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/nodecache/nodecache/internal/migrate"
	"github.com/nodecache/nodecache/pkg/corefile"
)

// Exit statuses of `nodecache migrate`.
const (
	exitUnsupported = 3 // config written, some directives not reproduced
	exitBadInput    = 2 // nothing written
)

// statusError carries a command's own exit status up to ExitCode.
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// migrateEnv is what cmdMigrate reads and writes; tests replace parts.
type migrateEnv struct {
	stdout, stderr io.Writer
	// client returns the API client for --from-cluster.
	client func(kubeconfig string) (kubernetes.Interface, error)
}

type varsFlag corefile.Vars

func (v varsFlag) String() string { return "" }
func (v varsFlag) Set(s string) error {
	name, val, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("%q: want NAME=VALUE", s)
	}
	v[name] = val
	return nil
}

// cmdMigrate is `nodecache migrate`.
func cmdMigrate(args []string, version string) error {
	client := func(kubeconfig string) (kubernetes.Interface, error) { return kubeClientFor(kubeconfig, version) }
	return runMigrate(context.Background(), args, migrateEnv{stdout: os.Stdout, stderr: os.Stderr, client: client})
}

func runMigrate(ctx context.Context, args []string, env migrateEnv) error {
	var in inputFlags
	var out, clusterDomain string
	var accept bool
	vars := corefile.Vars{}
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.StringVar(&in.corefile, "corefile", "", "the Corefile to translate (node-local-dns's or the coredns ConfigMap's)")
	fs.StringVar(&in.kubeDNSDir, "kube-dns-config", "", "directory with the kube-dns ConfigMap's files (stubDomains, upstreamNameservers)")
	fs.StringVar(&in.importDir, "import-dir", "", "directory with the files the Corefile's imports name (the coredns-custom ConfigMap's keys): each import's file name pattern is matched here")
	fs.BoolVar(&in.fromCluster, "from-cluster", false, "read the ConfigMaps from kube-system (the node-local DNS one by its known names and Helm labels, else CoreDNS's; coredns-custom for imports; kube-dns), read-only")
	fs.StringVar(&in.configMap, "configmap", "", "--from-cluster: the ConfigMap in kube-system whose Corefile to read (default: found by name and labels)")
	fs.StringVar(&in.kubeconfig, "kubeconfig", "", "kubeconfig for --from-cluster (default: in-cluster config, then $KUBECONFIG)")
	fs.StringVar(&out, "o", "", "write the config here (default stdout)")
	fs.BoolVar(&accept, "accept-unsupported", false, "exit 0 even when something cannot be reproduced (it is still listed)")
	fs.StringVar(&clusterDomain, "cluster-domain", "cluster.local", "cluster domain when the Corefile has no kubernetes plugin")
	fs.Var(varsFlag(vars), "var", "NAME=VALUE for {$NAME}, %{NAME}% and __PILLAR__NAME__ placeholders (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &statusError{exitBadInput, fmt.Errorf("migrate: %w", err)}
	}
	if fs.NArg() > 0 {
		return &statusError{exitBadInput, fmt.Errorf("migrate: unexpected argument %q", fs.Arg(0))}
	}
	if in.corefile == "" && !in.fromCluster {
		return &statusError{exitBadInput, errors.New("migrate: give --corefile FILE or --from-cluster")}
	}
	if _, ok := vars[migrate.UpstreamPillar]; !ok {
		vars[migrate.UpstreamPillar] = "/etc/resolv.conf" // what node-cache fills in
	}
	input, err := readMigrateInput(ctx, env, in)
	if err != nil {
		return &statusError{exitBadInput, fmt.Errorf("migrate: %w", err)}
	}
	defer input.cleanup()
	if input.from != "" {
		fmt.Fprintf(env.stderr, "migrate: read ConfigMap %s (%s)\n", input.name, input.from)
	}
	m, err := migrateFrom(input, vars, migrate.Options{ClusterDomain: clusterDomain})
	if err != nil {
		return &statusError{exitBadInput, fmt.Errorf("migrate: %w", err)}
	}
	if err := writeMigration(m, out, env.stdout); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, u := range m.Unsupported() {
		fmt.Fprintln(env.stderr, "not reproduced:", u)
	}
	if len(m.Unsupported()) > 0 && !accept {
		return &statusError{exitUnsupported, fmt.Errorf("migrate: %d directives not reproduced (listed above); the config was written. --accept-unsupported takes them as they are", len(m.Unsupported()))}
	}
	return nil
}

// migrateFrom parses the input and translates it.
func migrateFrom(in *migrateInput, vars corefile.Vars, o migrate.Options) (*migrate.Migration, error) {
	cf, err := corefile.ParseOptions(in.name, in.text, corefile.Options{Vars: vars, Import: in.importer})
	if err != nil {
		return nil, err
	}
	m, err := migrate.Translate(cf, o, in.name)
	if err != nil {
		return nil, err
	}
	if in.kubeDNSDir != "" {
		if err := m.AddKubeDNS(in.kubeDNSDir); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// writeMigration writes the config to path (or w when path is ""), after
// checking that `nodecache run` reads it.
func writeMigration(m *migrate.Migration, path string, w io.Writer) error {
	var buf bytes.Buffer
	if err := m.WriteYAML(&buf); err != nil {
		return err
	}
	if err := migrate.Check(buf.Bytes()); err != nil {
		return fmt.Errorf("the config written does not load (a bug in migrate): %w", err)
	}
	if path == "" {
		_, err := w.Write(buf.Bytes())
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644) //nolint:gosec // a config file, not a secret
}
