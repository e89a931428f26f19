package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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
	var corefilePath, kubeDNSDir, out, kubeconfig, clusterDomain string
	var fromCluster, accept bool
	vars := corefile.Vars{}
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.StringVar(&corefilePath, "corefile", "", "the Corefile to translate (node-local-dns's or the coredns ConfigMap's)")
	fs.StringVar(&kubeDNSDir, "kube-dns-config", "", "directory with the kube-dns ConfigMap's files (stubDomains, upstreamNameservers)")
	fs.BoolVar(&fromCluster, "from-cluster", false, "read the ConfigMaps from kube-system (node-local-dns, else coredns; kube-dns), read-only")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig for --from-cluster (default: in-cluster config, then $KUBECONFIG)")
	fs.StringVar(&out, "o", "", "write the config here (default stdout)")
	fs.BoolVar(&accept, "accept-unsupported", false, "exit 0 even when something cannot be reproduced (it is still listed)")
	fs.StringVar(&clusterDomain, "cluster-domain", "cluster.local", "cluster domain when the Corefile has no kubernetes plugin")
	fs.Var(varsFlag(vars), "var", "NAME=VALUE for {$NAME} and __PILLAR__NAME__ placeholders (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &statusError{exitBadInput, fmt.Errorf("migrate: %w", err)}
	}
	if fs.NArg() > 0 {
		return &statusError{exitBadInput, fmt.Errorf("migrate: unexpected argument %q", fs.Arg(0))}
	}
	if corefilePath == "" && !fromCluster {
		return &statusError{exitBadInput, errors.New("migrate: give --corefile FILE or --from-cluster")}
	}
	if _, ok := vars[migrate.UpstreamPillar]; !ok {
		vars[migrate.UpstreamPillar] = "/etc/resolv.conf" // what node-cache fills in
	}
	in, err := readMigrateInput(ctx, env, corefilePath, kubeDNSDir, fromCluster, kubeconfig)
	if err != nil {
		return &statusError{exitBadInput, fmt.Errorf("migrate: %w", err)}
	}
	defer in.cleanup()
	m, err := migrateFrom(in, vars, migrate.Options{ClusterDomain: clusterDomain})
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

// migrateInput is the Corefile text and the kube-dns ConfigMap directory.
type migrateInput struct {
	name, text string
	kubeDNSDir string // "" when none
	cleanup    func()
}

func readMigrateInput(ctx context.Context, env migrateEnv, path, kubeDNSDir string, fromCluster bool, kubeconfig string) (*migrateInput, error) {
	in := &migrateInput{kubeDNSDir: kubeDNSDir, cleanup: func() {}}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading --corefile: %w", err)
		}
		in.name, in.text = filepath.Base(path), string(data)
	}
	if !fromCluster {
		return in, nil
	}
	client, err := env.client(kubeconfig)
	if err != nil {
		return nil, err
	}
	if in.text == "" {
		if in.name, in.text, err = clusterCorefile(ctx, client); err != nil {
			return nil, err
		}
	}
	if in.kubeDNSDir == "" {
		dir, err := os.MkdirTemp("", "nodecache-migrate-")
		if err != nil {
			return nil, err
		}
		in.cleanup = func() { _ = os.RemoveAll(dir) }
		found, err := clusterKubeDNS(ctx, client, dir)
		if err != nil {
			in.cleanup()
			return nil, err
		}
		if found {
			in.kubeDNSDir = dir
		}
	}
	return in, nil
}

// clusterCorefile reads the node-local-dns ConfigMap's Corefile, or the
// coredns one's when there is no node-local-dns.
func clusterCorefile(ctx context.Context, c kubernetes.Interface) (name, text string, err error) {
	for _, cm := range []string{"node-local-dns", "coredns"} {
		obj, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, cm, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", "", fmt.Errorf("reading ConfigMap kube-system/%s: %w", cm, err)
		}
		if text, ok := obj.Data["Corefile"]; ok {
			return "kube-system/" + cm, text, nil
		}
	}
	return "", "", errors.New("no Corefile in ConfigMap kube-system/node-local-dns or kube-system/coredns")
}

// clusterKubeDNS writes the kube-dns ConfigMap's files into dir.
func clusterKubeDNS(ctx context.Context, c kubernetes.Interface, dir string) (bool, error) {
	obj, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading ConfigMap kube-system/kube-dns: %w", err)
	}
	for k, v := range obj.Data {
		if k != "stubDomains" && k != "upstreamNameservers" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			return false, err
		}
	}
	return true, nil
}

// kubeClientFor is a client for kubeconfig (default: in-cluster, then
// $KUBECONFIG) whose user agent names the build.
func kubeClientFor(kubeconfig, version string) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.UserAgent = "nodecache-migrate/" + version
	return kubernetes.NewForConfig(rc)
}

// migrateFrom parses the input and translates it.
func migrateFrom(in *migrateInput, vars corefile.Vars, o migrate.Options) (*migrate.Migration, error) {
	cf, err := corefile.Parse(in.name, in.text, vars)
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
