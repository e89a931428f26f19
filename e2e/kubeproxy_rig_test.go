//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// kubeDNSIP is the kube-dns ClusterIP the kube-proxy tests intercept.
const kubeDNSIP = "10.96.0.10"

// kubeProxyBin returns the kube-proxy binary built with the other Kubernetes binaries; it skips t
// (fails it under CI=true) when there is none.
func kubeProxyBin(t testing.TB) string {
	t.Helper()
	dir, err := apiServerBinDir()
	if err == nil {
		p := filepath.Join(dir, "kube-proxy")
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("no kube-proxy binary (run e2e/tools/build-k8s.sh): %v", err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPING: " + msg)
	return ""
}

// kubeProxy is the real kube-proxy running in a node netns with the admin identity.
type kubeProxy struct {
	node       *netNS
	mode       string // "iptables" or "nftables"
	nodeName   string
	kubeconfig string
	bin        string
	proc       *proc
	starts     int
	// waitIPs are the Service IPs whose rules start waits for (default: kubeDNSIP).
	waitIPs []string
}

// startKubeProxy registers a Node named nodeName with InternalIP nodeIP (kube-proxy waits 30 s
// for its node's IPs otherwise), then runs kube-proxy in mode inside node, reaching the suite's
// apiserver through a forwarder there.
func startKubeProxy(t testing.TB, node *netNS, mode, nodeName, nodeIP string) *kubeProxy {
	t.Helper()
	createNode(t, nodeName, nodeIP)
	fwd := forwardTCP(t, node, strings.TrimPrefix(env.api.URL, "https://"))
	return runKubeProxy(t, node, mode, nodeName, env.api, fwd.Addr(), kubeDNSIP)
}

// runKubeProxy runs kube-proxy in mode inside node as the admin of api, reached at apiAddr (a
// forwarder in node), for the Node nodeName, and waits for its rules for the Service IPs waitIPs.
// Cleanup stops it and runs `kube-proxy --cleanup`.
func runKubeProxy(t testing.TB, node *netNS, mode, nodeName string, api *apiServer, apiAddr string, waitIPs ...string) *kubeProxy {
	t.Helper()
	k := &kubeProxy{node: node, mode: mode, nodeName: nodeName, bin: kubeProxyBin(t), waitIPs: waitIPs}
	k.kubeconfig = filepath.Join(t.TempDir(), "kube-proxy.kubeconfig")
	if err := writeKubeconfig(k.kubeconfig, "https://"+apiAddr, api.PKI.caPEM, api.AdminToken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.stop(t)
		if out, err := k.cleanup(); err != nil {
			t.Errorf("kube-proxy --cleanup at the end: %v\n%s", err, out)
		}
	})
	k.start(t)
	return k
}

// start runs kube-proxy (again) and waits until its rules name every IP of waitIPs.
func (k *kubeProxy) start(t testing.TB) {
	t.Helper()
	k.starts++
	logPath := filepath.Join(t.TempDir(), fmt.Sprintf("kube-proxy-%d.log", k.starts))
	p, err := startProc("kube-proxy", logPath, "ip", "netns", "exec", k.node.Name, k.bin,
		"--kubeconfig="+k.kubeconfig, "--proxy-mode="+k.mode, "--hostname-override="+k.nodeName,
		// Leave the host's conntrack sysctls alone.
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0s", "--conntrack-tcp-timeout-close-wait=0s",
		"--healthz-bind-address=127.0.0.1:10256", "--metrics-bind-address=127.0.0.1:10249", "--v=2")
	if err != nil {
		t.Fatal(err)
	}
	k.proc = p
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-proxy log (start %d):\n%s", k.starts, p.logTail(8000))
		}
	})
	eventuallyWithin(t, 60*time.Second, "kube-proxy's rules for "+strings.Join(k.waitIPs, ", "), func() error {
		if gone, werr := p.exited(); gone {
			return fmt.Errorf("kube-proxy exited (%v):\n%s", werr, p.logTail(4000))
		}
		rules := k.rules(t)
		for _, ip := range k.waitIPs {
			// 10.96.0.1 must not match 10.96.0.10.
			if !regexp.MustCompile(regexp.QuoteMeta(ip) + `\b`).MatchString(rules) {
				return fmt.Errorf("no rule for %s yet", ip)
			}
		}
		return nil
	})
}

// stop ends kube-proxy (SIGTERM). Its rules stay, as they do when kube-proxy restarts.
func (k *kubeProxy) stop(t testing.TB) {
	t.Helper()
	if k.proc != nil {
		if err := k.proc.Stop(10 * time.Second); err != nil {
			t.Logf("stopping kube-proxy: %v", err)
		}
	}
}

// cleanup runs `kube-proxy --cleanup` in the node: it removes the rules of every mode and exits.
func (k *kubeProxy) cleanup() (string, error) {
	out, err := exec.Command("ip", "netns", "exec", k.node.Name, k.bin, "--cleanup", "--proxy-mode="+k.mode, "--v=2").CombinedOutput()
	return string(out), err
}

// rules is kube-proxy's ruleset of its mode, as the kernel holds it.
func (k *kubeProxy) rules(t testing.TB) string {
	t.Helper()
	if k.mode == "nftables" {
		out, err := exec.Command("ip", "netns", "exec", k.node.Name, "nft", "list", "table", "ip", "kube-proxy").CombinedOutput()
		if err != nil {
			return "" // no table yet
		}
		return string(out)
	}
	return nsCommand(t, k.node, "iptables-save", "-t", "nat")
}

// createNode registers a Node with an InternalIP; cleanup deletes it.
func createNode(t testing.TB, name, ip string) {
	t.Helper()
	c := env.api.Admin.CoreV1().Nodes()
	n, err := c.Create(apiCtx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting node %s: %v", name, err)
		}
	})
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	if _, err := c.UpdateStatus(apiCtx(t), n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting the addresses of node %s: %v", name, err)
	}
}

// createKubeDNS creates kube-system/kube-dns with ClusterIP kubeDNSIP (ports 53 over UDP and TCP,
// named dns and dns-tcp as kubeadm names them) and its EndpointSlice, backed by backend (ip:port);
// cleanup deletes both.
func createKubeDNS(t testing.TB, backend string) {
	t.Helper()
	ip, port := splitHostPort(t, backend)
	const ns = "kube-system"
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-dns", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: kubeDNSIP, ClusterIPs: []string{kubeDNSIP},
			Ports: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(port)},
				{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(port)},
			},
		},
	}
	createService(t, svc)
	es := createEndpointSlice(t, ns, "kube-dns", discoveryv1.AddressTypeIPv4, []endpoint{{IP: ip}},
		svcPort("dns", corev1.ProtocolUDP, port), svcPort("dns-tcp", corev1.ProtocolTCP, port))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, err := range []error{
			env.api.Admin.DiscoveryV1().EndpointSlices(ns).Delete(ctx, es.Name, metav1.DeleteOptions{}),
			env.api.Admin.CoreV1().Services(ns).Delete(ctx, "kube-dns", metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting kube-system/kube-dns: %v", err)
			}
		}
	})
}

func splitHostPort(t testing.TB, addr string) (string, int32) {
	t.Helper()
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	p, err := strconv.ParseUint(ps, 10, 16)
	if err != nil {
		t.Fatalf("port of %q: %v", addr, err)
	}
	return host, int32(p)
}

// ruleSnapshot is the agent's rule lines in backend (v4, raw and filter), sorted, and an error
// naming any line there twice or a raw-table jump not first.
func ruleSnapshot(t testing.TB, node *netNS, backend string) ([]string, error) {
	t.Helper()
	var all []string
	var errs []error
	for _, table := range []string{"raw", "filter"} {
		save, lines := nodecacheLines(t, node, "iptables", backend, table)
		for _, l := range lines {
			all = append(all, table+" "+l)
		}
		if table == "raw" {
			for _, chain := range []string{"PREROUTING", "OUTPUT"} {
				errs = append(errs, jumpFirstOnce(save, chain))
			}
		}
	}
	sort.Strings(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			errs = append(errs, fmt.Errorf("rule %q twice", all[i]))
		}
	}
	return all, errors.Join(errs...)
}
