package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/internal/agent"
	"github.com/nodecache/nodecache/internal/doctor"
	"github.com/nodecache/nodecache/internal/migrate"
	"github.com/nodecache/nodecache/pkg/corefile"
	"github.com/nodecache/nodecache/pkg/iface"
)

// cmdDoctor is `nodecache doctor`: flags, the node's real inputs, and the
// report. The checks are internal/doctor's.
func cmdDoctor(ctx context.Context, out io.Writer, args []string, version string) error {
	var o cliOpts
	var localIPs, inspect string
	var port uint
	env := &doctor.Env{ReadFile: os.ReadFile, Run: doctor.RunCommand, Unsupported: corefileUnsupported}
	fs := newCLIFlags("doctor", &o)
	fs.StringVar(&env.KubeletConfig, "kubelet-config", "/var/lib/kubelet/config.yaml", "kubelet's KubeletConfiguration file")
	fs.StringVar(&env.ResolvConf, "resolv-conf", "/etc/resolv.conf", "the node's resolv.conf")
	fs.DurationVar(&env.DNSTimeout, "timeout", 2*time.Second, "timeout of each test query to a listener")
	fs.StringVar(&localIPs, "local-ip", "169.254.20.10", "local IPs to check when the agent cannot say (comma list)")
	fs.UintVar(&port, "port", 53, "DNS port to check when the agent cannot say")
	fs.StringVar(&env.InterfaceName, "interface-name", iface.DefaultInterfaceName, "link to check when the agent cannot say")
	fs.StringVar(&inspect, "inspect", "auto", "inspect link and rules directly with pkg/iface: auto (when root), always or never")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig to read the coredns ConfigMap (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
	if _, err := parseCLI(fs, &o, args, 0, 0); err != nil {
		return err
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "kubelet-config" })
	env.KubeletConfig = kubeletConfigPath(env.KubeletConfig, given, podKubeletConfig)
	var err error
	if env.LocalIPs, err = agent.ParseIPList(localIPs); err != nil {
		return usageErrorf("doctor: --local-ip: %v", err)
	}
	if port == 0 || port > 65535 {
		return usageErrorf("doctor: --port %d: want 1 to 65535", port)
	}
	env.Port = uint16(port)
	switch {
	case inspect == "always" || (inspect == "auto" && os.Geteuid() == 0):
		env.Inspect = doctor.InspectKernel
	case inspect != "never" && inspect != "auto":
		return usageErrorf("doctor: --inspect %q: want auto, always or never", inspect)
	}
	env.Client = adminapi.NewClient(o.socket)
	if canReachAPI(*kubeconfig) {
		env.CoreDNS = readCoreDNSCorefile(*kubeconfig, version)
	}
	found := env.Diagnose(ctx)
	if err := emit(out, &o, found, func(w io.Writer) { doctor.Print(w, found) }); err != nil {
		return err
	}
	if n := doctor.Count(found, doctor.Fail); n > 0 {
		return fmt.Errorf("doctor: %d checks failed: %w", n, errFindings)
	}
	if n := doctor.Count(found, doctor.Warn); n > 0 {
		return fmt.Errorf("doctor: %d checks warned: %w", n, errWarnings)
	}
	return nil
}

// corefileUnsupported is what `nodecache migrate` cannot reproduce of the
// cluster's Corefile, for doctor's coredns check.
func corefileUnsupported(cf *corefile.Corefile, clusterDomain string) ([]string, error) {
	m, err := migrate.Translate(cf, migrate.Options{ClusterDomain: clusterDomain}, "coredns")
	if err != nil {
		return nil, err
	}
	return m.Unsupported(), nil
}

// readCoreDNSCorefile reads the coredns ConfigMap's Corefile with the
// default client config (in-cluster, then $KUBECONFIG, or kubeconfig).
func readCoreDNSCorefile(kubeconfig, version string) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		c, err := kubeClientFor(kubeconfig, version)
		if err != nil {
			return "", err
		}
		cm, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("reading ConfigMap kube-system/coredns: %w", err)
		}
		return cm.Data["Corefile"], nil
	}
}

// canReachAPI reports whether doctor has credentials to try: in a pod,
// $KUBECONFIG, ~/.kube/config or --kubeconfig.
func canReachAPI(kubeconfig string) bool {
	if kubeconfig != "" || os.Getenv("KUBECONFIG") != "" || agent.InCluster() {
		return true
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return false
	}
	_, err = os.Stat(home + "/.kube/config")
	return err == nil
}

// podKubeletConfig is where the DaemonSet mounts kubeadm's kubelet-config
// ConfigMap (key kubelet, optional): the KubeletConfiguration of the
// cluster, which kubeadm writes to every node's /var/lib/kubelet/config.yaml.
const podKubeletConfig = "/etc/kubelet-config/kubelet"

// kubeletConfigPath is the kubelet config doctor reads: the flag's when it
// was given or the file is there (on the node), else podPath, the ConfigMap
// the agent's pod mounts, when there (doctor run with kubectl exec).
func kubeletConfigPath(path string, given bool, podPath string) string {
	if given {
		return path
	}
	if _, err := os.Stat(path); err != nil {
		if _, err := os.Stat(podPath); err == nil {
			return podPath
		}
	}
	return path
}
