package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// migrateInput is the Corefile text, where its imports are read from, and
// the kube-dns ConfigMap directory.
type migrateInput struct {
	name, text string
	from       string            // how the Corefile was found, for stderr; "" for a file
	importer   corefile.Importer // nil: the file system, relative to the Corefile
	kubeDNSDir string            // "" when none
	cleanup    func()
}

// inputFlags are migrate's flags that say where the input is.
type inputFlags struct {
	corefile, kubeDNSDir, importDir, configMap, kubeconfig string
	fromCluster                                            bool
}

func readMigrateInput(ctx context.Context, env migrateEnv, f inputFlags) (*migrateInput, error) {
	in := &migrateInput{kubeDNSDir: f.kubeDNSDir, cleanup: func() {}}
	if f.importDir != "" {
		in.importer = corefile.FlatImporter(f.importDir, f.importDir)
	}
	if f.corefile != "" {
		data, err := os.ReadFile(f.corefile)
		if err != nil {
			return nil, fmt.Errorf("reading --corefile: %w", err)
		}
		in.name, in.text = filepath.Base(f.corefile), string(data)
		if in.importer == nil {
			in.importer = corefile.DirImporterIn(filepath.Dir(f.corefile))
		}
	}
	if !f.fromCluster {
		return in, nil
	}
	client, err := env.client(f.kubeconfig)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nodecache-migrate-")
	if err != nil {
		return nil, err
	}
	in.cleanup = func() { _ = os.RemoveAll(dir) }
	if err := in.readCluster(ctx, client, f, dir); err != nil {
		in.cleanup()
		return nil, err
	}
	return in, nil
}

// readCluster reads what --from-cluster reads: the Corefile (unless
// --corefile gave one), the coredns-custom ConfigMap its imports name
// (AKS, k3s) and the kube-dns ConfigMap, into dir.
func (in *migrateInput) readCluster(ctx context.Context, c kubernetes.Interface, f inputFlags, dir string) error {
	if in.text == "" {
		cm, how, err := findCorefileConfigMap(ctx, c, f.configMap)
		if err != nil {
			return err
		}
		in.name, in.text, in.from = "kube-system/"+cm.Name, cm.Data["Corefile"], how
	}
	if f.importDir == "" && strings.Contains(in.text, "import") {
		custom := filepath.Join(dir, "coredns-custom")
		found, err := writeConfigMap(ctx, c, "coredns-custom", custom, nil)
		if err != nil {
			return err
		}
		if !found {
			if err := os.Mkdir(custom, 0o700); err != nil {
				return err
			}
		}
		in.importer = corefile.FlatImporter(custom, "kube-system/coredns-custom")
	}
	if in.kubeDNSDir == "" {
		kd := filepath.Join(dir, "kube-dns")
		found, err := writeConfigMap(ctx, c, "kube-dns", kd, []string{"stubDomains", "upstreamNameservers"})
		if err != nil {
			return err
		}
		if found {
			in.kubeDNSDir = kd
		}
	}
	return nil
}

// The ConfigMaps that hold a node-local DNS Corefile, by name (the
// upstream manifest's and kubespray's) and by the labels of the
// node-local-dns Helm chart, whose ConfigMap is named after its release;
// then the cluster DNS's, by name and by the CoreDNS chart's labels
// (RKE2's is rke2-coredns-rke2-coredns).
var corefileSearch = []struct {
	what     string
	names    []string
	selector string
}{
	{"node-local DNS", []string{"node-local-dns", "nodelocaldns"}, "app.kubernetes.io/name=node-local-dns"},
	{"cluster DNS", []string{"coredns"}, "app.kubernetes.io/name in (coredns,rke2-coredns)"},
}

// findCorefileConfigMap finds the ConfigMap in kube-system whose Corefile
// migrate reads, and says how it found it.
func findCorefileConfigMap(ctx context.Context, c kubernetes.Interface, name string) (*corev1.ConfigMap, string, error) {
	if name != "" {
		cm, err := getConfigMap(ctx, c, name)
		switch {
		case err != nil:
			return nil, "", err
		case cm == nil || cm.Data["Corefile"] == "":
			return nil, "", fmt.Errorf("ConfigMap kube-system/%s (--configmap) has no Corefile", name)
		}
		return cm, "named by --configmap", nil
	}
	var tried []string
	for _, s := range corefileSearch {
		for _, n := range s.names {
			tried = append(tried, n)
			cm, err := getConfigMap(ctx, c, n)
			if err != nil {
				return nil, "", err
			}
			if cm != nil && cm.Data["Corefile"] != "" {
				return cm, fmt.Sprintf("the %s ConfigMap, found by its name", s.what), nil
			}
		}
		list, err := c.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{LabelSelector: s.selector})
		if err != nil {
			return nil, "", fmt.Errorf("listing ConfigMaps in kube-system with %s: %w", s.selector, err)
		}
		tried = append(tried, "labels "+s.selector)
		var found []*corev1.ConfigMap
		for i := range list.Items {
			if list.Items[i].Data["Corefile"] != "" {
				found = append(found, &list.Items[i])
			}
		}
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], fmt.Sprintf("the %s ConfigMap, found by its labels %s", s.what, s.selector), nil
		}
		names := make([]string, len(found))
		for i, cm := range found {
			names[i] = cm.Name
		}
		sort.Strings(names)
		return nil, "", fmt.Errorf("several %s ConfigMaps in kube-system (%s): say which with --configmap NAME", s.what, strings.Join(names, ", "))
	}
	return nil, "", fmt.Errorf("no Corefile in kube-system: looked for ConfigMaps %s; give --configmap NAME or --corefile FILE", strings.Join(tried, ", "))
}

func getConfigMap(ctx context.Context, c kubernetes.Interface, name string) (*corev1.ConfigMap, error) {
	cm, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading ConfigMap kube-system/%s: %w", name, err)
	}
	return cm, nil
}

// writeConfigMap writes the keys of ConfigMap kube-system/name (only
// those in keys, unless nil) as files into dir, as a volume mounts them.
func writeConfigMap(ctx context.Context, c kubernetes.Interface, name, dir string, keys []string) (bool, error) {
	cm, err := getConfigMap(ctx, c, name)
	if err != nil || cm == nil {
		return false, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return false, err
	}
	for k, v := range cm.Data {
		if keys != nil && !slices.Contains(keys, k) {
			continue
		}
		if k != filepath.Base(k) || k == "." || k == ".." {
			return false, fmt.Errorf("ConfigMap kube-system/%s: key %q is not a file name", name, k)
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
