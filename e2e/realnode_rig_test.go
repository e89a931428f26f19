//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The real node: a cluster of one node, built from the same parts as a real
// one. Its own etcd and kube-apiserver (ServiceAccount admission on), a
// kube-controller-manager and kube-scheduler on the host's loopback; and in a
// network namespace of its own, containerd (Debian's, with runc and the CNI
// plugins) and a kubelet with clusterDNS 169.254.20.10. Pods get a bridge CNI
// network inside that namespace; hostNetwork pods (the agent) share it.
//
// Everything the rig creates lives under one directory, one network
// namespace and one cgroup subtree, and is removed by PID and path when the
// test ends, also when it fails.

const (
	nodeName   = "e2e-node"
	podSubnet  = "10.244.0.0/24"
	pauseImage = "docker.io/nodecache-e2e/pause:1"
	agentRepo  = "nodecache-e2e/agent"
	clientRepo = "docker.io/nodecache-e2e/client:1"
	cniBinDir  = "/usr/lib/cni"
	ctrNS      = "k8s.io"
)

type realNode struct {
	t      testing.TB
	dir    string // everything on disk
	bin    string // etcd, kube-*, kubelet
	api    *apiServer
	ns     *netNS // the node's network namespace
	link   nodeLink
	apiFwd *tcpForwarder // 127.0.0.1:F in the node: the kubelet's, kube-proxy's, the rig overlay's
	// apiAdv listens on the API server's advertise address (the node's
	// InternalIP) and secure port in the node: the default/kubernetes
	// EndpointSlice names it, so 10.96.0.1:443 leads there through
	// kube-proxy, as on a kubeadm node whose API server listens on its IP.
	apiAdv   *tcpForwarder
	upstream *dnsUpstream
	ctrSock  string
	admin    kubernetes.Interface

	cm, sched, containerd, kubelet *proc

	corednsMetrics string // ip:port of the running CoreDNS's /metrics, in the node netns

	kubeletCfg     string   // its KubeletConfiguration file
	kubeletArgv    []string // its command line, for a restart
	kubeletHealthz int      // its healthz port on the node's loopback

	hadKubepods bool            // the cgroup existed before: leave it
	netnsBefore map[string]bool // /run/netns entries before containerd started

	webIP string   // ClusterIP of e2e/web
	dbIPs []string // endpoints of the headless e2e/db, sorted
}

// realNodePrereqs says what this machine lacks for a real node.
func realNodePrereqs(bin string) error {
	var missing []string
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "kubectl", "nsenter"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	for _, p := range []string{filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local"), filepath.Join(cniBinDir, "loopback")} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, b := range []string{"kubelet", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			missing = append(missing, filepath.Join(bin, b)+" (run e2e/tools/build-k8s.sh)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("a real node needs %s (hack/install-deps.sh, which make test runs, installs containerd, runc and containernetworking-plugins)", strings.Join(missing, ", "))
	}
	return nil
}

// requireRealNode skips t (or fails it under CI=true) when this machine
// lacks what a real node needs, and returns the Kubernetes binaries' dir.
func requireRealNode(t *testing.T) string {
	t.Helper()
	bin, err := apiServerBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := realNodePrereqs(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real node cannot run and CI=true forbids skipping: %v", err)
		}
		t.Skipf("SKIPPING real node (set CI=true to make this a failure): %v", err)
	}
	return bin
}

// startRealNode brings the cluster and its node up, with the agent's images
// imported, and waits until the node is Ready. What it makes lives as long
// as tb (the shared node's); t is the test that asked first.
func startRealNode(t *testing.T, tb *nodeTB, bin string) *realNode {
	t.Helper()
	// Not under /tmp: containerd's overlay snapshots need a real
	// filesystem, and the kubelet's volumes want one too.
	dir, err := os.MkdirTemp("/var/lib", "nodecache-e2e-node-")
	if err != nil {
		t.Fatal(err)
	}
	n := &realNode{t: tb, dir: dir, bin: bin, netnsBefore: map[string]bool{}}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			n.netnsBefore[e.Name()] = true
		}
	}
	_, err = os.Stat("/sys/fs/cgroup/memory/kubepods")
	n.hadKubepods = err == nil
	tb.Cleanup(n.cleanup)
	start := time.Now()
	stage := func(what string) {
		t.Logf("real node: %s (+%v)", what, time.Since(start).Round(100*time.Millisecond))
	}

	kubeletToken := "nodecache-e2e-kubelet-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// Generous: the images' go build is cold on a fresh machine.
	ctx, cancel := context.WithTimeout(tb.Context(), 15*time.Minute)
	defer cancel()
	// The node's netns first: the API server advertises the node's IP.
	n.ns = newNetNS(tb, "node")
	// The default route leads nowhere: a bridge with no uplink.
	mustIP(t, "-n", n.ns.Name, "link", "add", "e2e0", "type", "bridge")
	mustIP(t, "-n", n.ns.Name, "link", "set", "e2e0", "up")
	mustIP(t, "-n", n.ns.Name, "route", "add", "default", "dev", "e2e0")
	n.link = linkNode(tb, n.ns, podSubnet)

	n.api, err = startAPIServerWith(ctx, bin, mkdir(t, dir, "api"), apiConfig{
		ServiceAccounts:  true,
		Kubelets:         true,
		AdvertiseAddress: n.link.NodeIP,
		Tokens:           []string{fmt.Sprintf("%s,system:node:%s,kubelet-%s,\"system:nodes\"", kubeletToken, nodeName, nodeName)},
	})
	if err != nil {
		t.Fatalf("starting the node's apiserver: %v", err)
	}
	n.admin = n.api.Admin
	stage("etcd and kube-apiserver ready")
	n.startControlPlane()
	stage("controller-manager and scheduler started")

	apiTarget := fmt.Sprintf("127.0.0.1:%d", n.api.Port)
	n.apiFwd = forwardTCP(tb, n.ns, apiTarget)
	n.apiAdv = forwardTCPAt(tb, n.ns, fmt.Sprintf("%s:%d", n.link.NodeIP, n.api.Port), apiTarget)
	n.upstream = startUpstream(tb, n.ns, "127.0.0.1")

	n.startContainerd(ctx)
	stage("containerd ready")
	n.importImages(ctx)
	stage("images imported")
	n.startKubelet(kubeletToken)
	n.waitNodeReady(ctx)
	stage("node Ready")
	return n
}

func mkdir(t testing.TB, parts ...string) string {
	t.Helper()
	p := filepath.Join(parts...)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeRigFile(t testing.TB, path, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// inNode returns argv wrapped to run in the node's network namespace. Only
// the network namespace: containerd and the kubelet must share the host's
// mount namespace, as they do on a real node (`ip netns exec` would give
// each a private one).
func (n *realNode) inNode(argv ...string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + n.ns.Name, "--"}, argv...)
}

func (n *realNode) startControlPlane() {
	t := n.t
	admin := n.api.AdminKubeconfig
	port := func() string {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		return strconv.Itoa(p)
	}
	var err error
	n.cm, err = startProc("kube-controller-manager", filepath.Join(n.dir, "kube-controller-manager.log"),
		filepath.Join(n.bin, "kube-controller-manager"),
		"--kubeconfig="+admin, "--authentication-kubeconfig="+admin, "--authorization-kubeconfig="+admin,
		"--bind-address=127.0.0.1", "--secure-port="+port(), "--leader-elect=false",
		"--root-ca-file="+n.api.PKI.caCert, "--service-account-private-key-file="+n.api.PKI.saKey,
		"--use-service-account-credentials=false", "--controllers=*",
		"--node-monitor-grace-period=20s", "--v=1")
	if err != nil {
		t.Fatal(err)
	}
	n.sched, err = startProc("kube-scheduler", filepath.Join(n.dir, "kube-scheduler.log"),
		filepath.Join(n.bin, "kube-scheduler"),
		"--kubeconfig="+admin, "--authentication-kubeconfig="+admin, "--authorization-kubeconfig="+admin,
		"--bind-address=127.0.0.1", "--secure-port="+port(), "--leader-elect=false", "--v=1")
	if err != nil {
		t.Fatal(err)
	}
}

func (n *realNode) startContainerd(ctx context.Context) {
	t := n.t
	cd := mkdir(t, n.dir, "containerd")
	n.ctrSock = filepath.Join(cd, "containerd.sock")
	conflist := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "nce2e",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podSubnet, filepath.Join(n.dir, "cni", "ipam"))
	writeRigFile(t, filepath.Join(n.dir, "cni", "net.d", "10-nce2e.conflist"), conflist)
	// restrict_oom_score_adj: this machine forbids lowering a process's
	// oom_score_adj, even as root; without it every sandbox fails to start.
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  netns_mounts_under = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(cd, "root"), filepath.Join(cd, "state"), n.ctrSock, pauseImage,
		filepath.Join(cd, "netns"), cniBinDir, filepath.Join(n.dir, "cni", "net.d"), filepath.Join(cd, "opt"))
	cfgPath := writeRigFile(t, filepath.Join(cd, "config.toml"), cfg)
	var err error
	n.containerd, err = startProc("containerd", filepath.Join(n.dir, "containerd.log"),
		n.inNode("containerd", "--config", cfgPath)...)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := poll(wctx, 200*time.Millisecond, n.containerd, func(ctx context.Context) error {
		_, err := n.ctr(ctx, "version")
		return err
	}); err != nil {
		t.Fatalf("waiting for containerd: %v\n%s", err, n.containerd.logTail(4000))
	}
}

// ctr runs ctr against the node's containerd in the CRI namespace.
func (n *realNode) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.ctrSock, "--namespace", ctrNS}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (n *realNode) importImages(ctx context.Context) {
	t := n.t
	imgDir := mkdir(t, n.dir, "images")
	tars, err := buildNodeImages(ctx, imgDir)
	if err != nil {
		t.Fatalf("building images: %v", err)
	}
	n.importTars(ctx, tars)
	n.importAgentImage(ctx, imgDir)
}

// importAgentImage imports the amd64 variant of the image make image built
// under every agent tag, after checking that both variants hold binaries of
// their architecture and that the agent names this checkout's commit; the
// node's containerd must then hold it at the layout's digest.
func (n *realNode) importAgentImage(ctx context.Context, dir string) {
	t := n.t
	layout, err := agentImageLayout(ctx, dir)
	if err != nil {
		t.Fatalf("the agent image: %v", err)
	}
	tarPath, digest, agent, err := agentImageTar(layout, dir)
	if err != nil {
		t.Fatalf("the agent image in %s: %v", layout, err)
	}
	t.Logf("agent image: %s, linux/amd64 %s; linux/arm64's agent and iptables are arm64 ELF files", layout, digest)
	bin := filepath.Join(dir, "nodecache-from-image")
	if err := os.WriteFile(bin, agent, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin, "version").CombinedOutput()
	head, herr := exec.CommandContext(ctx, "git", "-C", "..", "rev-parse", "HEAD").Output()
	if err != nil || herr != nil || !strings.Contains(string(out), " commit "+strings.TrimSpace(string(head))+" ") {
		t.Fatalf("the image's agent says %q (%v), want the commit of this checkout %s (%v)", strings.TrimSpace(string(out)), err, strings.TrimSpace(string(head)), herr)
	}
	t.Logf("the image's agent: %s", strings.TrimSpace(string(out)))
	n.importTars(ctx, []string{tarPath})
	list, err := n.ctr(ctx, "images", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range agentImageTags {
		ref := "docker.io/" + agentImage(tag)
		if !imageListed(list, ref, digest) {
			t.Fatalf("containerd does not list %s at %s after the import:\n%s", ref, digest, list)
		}
	}
}

// imageListed says whether `ctr images ls` lists ref at digest.
func imageListed(list, ref, digest string) bool {
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == ref && strings.Contains(line, digest) {
			return true
		}
	}
	return false
}

// importTars imports image tarballs (docker-archive or OCI) into the node's
// containerd.
func (n *realNode) importTars(ctx context.Context, tars []string) {
	t := n.t
	for _, tar := range tars {
		if _, err := n.ctr(ctx, "images", "import", "--no-unpack=false", tar); err != nil {
			// Older ctr has no --no-unpack flag; unpacking is its default.
			if _, err2 := n.ctr(ctx, "images", "import", tar); err2 != nil {
				t.Fatalf("importing %s: %v", tar, err2)
			}
		}
	}
}

func (n *realNode) startKubelet(token string) {
	t := n.t
	kd := mkdir(t, n.dir, "kubelet")
	kubeconfig := filepath.Join(kd, "kubelet.kubeconfig")
	if err := writeKubeconfig(kubeconfig, "https://"+n.apiFwd.Addr(), n.api.PKI.caPEM, token); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	healthz, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	// The resolv.conf the kubelet gives dnsPolicy Default pods (the agent)
	// and whose search list it appends for ClusterFirst pods.
	resolv := writeRigFile(t, filepath.Join(kd, "resolv.conf"), "nameserver "+strings.Split(n.upstream.Addr, ":")[0]+"\n")
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
clusterDNS: ["%s"]
clusterDomain: cluster.local
resolvConf: %s
port: %d
healthzPort: %d
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
podLogsDir: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization:
  mode: AlwaysAllow
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
syncFrequency: 5s
nodeStatusUpdateFrequency: 4s
`, n.ctrSock, linkLocalIP, resolv, port, healthz, filepath.Join(n.dir, "pod-logs"), n.api.PKI.caCert)
	n.kubeletCfg = writeRigFile(t, filepath.Join(kd, "config.yaml"), cfg)
	n.kubeletHealthz = healthz
	n.kubeletArgv = n.inNode(
		filepath.Join(n.bin, "kubelet"), "--config="+n.kubeletCfg, "--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(kd, "root"), "--cert-dir="+filepath.Join(kd, "pki"),
		"--node-ip="+n.link.NodeIP, "--hostname-override="+nodeName, "--v=1")
	n.kubelet, err = startProc("kubelet", filepath.Join(n.dir, "kubelet.log"), n.kubeletArgv...)
	if err != nil {
		t.Fatal(err)
	}
}

func (n *realNode) waitNodeReady(ctx context.Context) {
	t := n.t
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	err := poll(wctx, time.Second, n.kubelet, func(ctx context.Context) error {
		node, err := n.admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue && len(node.Spec.Taints) == 0 {
					return nil
				}
				return fmt.Errorf("node Ready=%s (%s), taints %v", c.Status, c.Message, node.Spec.Taints)
			}
		}
		return errors.New("node has no Ready condition")
	})
	if err != nil {
		t.Fatalf("waiting for the node: %v\nkubelet:\n%s\ncontainerd:\n%s", err, n.kubelet.logTail(6000), n.containerd.logTail(3000))
	}
	// The controller-manager makes each namespace's default ServiceAccount;
	// pods are refused until it exists.
	err = poll(wctx, 500*time.Millisecond, n.cm, func(ctx context.Context) error {
		_, err := n.admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("waiting for the default ServiceAccount: %v\n%s", err, n.cm.logTail(4000))
	}
}

// kubectl runs kubectl as the node's cluster admin.
func (n *realNode) kubectl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", n.api.AdminKubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// logs dumps the rig's component logs into the test log, for a failure.
func (n *realNode) logs() {
	for _, p := range []*proc{n.kubelet, n.containerd, n.cm} {
		if p != nil {
			n.t.Logf("--- %s (tail) ---\n%s", p.name, p.logTail(5000))
		}
	}
}

// cleanup removes everything the rig made, in reverse order: the kubelet,
// every process in its pods' cgroups and every shim of this containerd,
// containerd, the control plane, mounts under the rig's directory, the pod
// cgroups, and the directory. Best effort: each failure is reported, none
// stops the rest.
func (n *realNode) cleanup() {
	t := n.t
	if t.Failed() {
		n.logs()
	}
	if n.kubelet != nil {
		_ = n.kubelet.Stop(15 * time.Second)
	}
	if n.ctrSock != "" {
		killed := 0
		for _, pid := range cgroupPIDs("kubepods") {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		for _, pid := range shimPIDs(n.ctrSock) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		if killed > 0 {
			t.Logf("real node cleanup: killed %d container and shim processes", killed)
		}
	}
	for _, p := range []*proc{n.containerd, n.sched, n.cm} {
		if p != nil {
			_ = p.Stop(15 * time.Second)
		}
	}
	if n.api != nil {
		if err := n.api.Stop(); err != nil {
			t.Logf("real node cleanup: %v", err)
		}
	}
	if err := unmountUnder(n.dir); err != nil {
		t.Errorf("real node cleanup: %v", err)
	}
	// The pods' network namespaces, where the CNI teardown did not run
	// (containerd 1.6 keeps them under /run/netns whatever its config says).
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "cni-") && !n.netnsBefore[e.Name()] {
				if out, err := ipCmd("netns", "del", e.Name()); err != nil {
					t.Errorf("real node cleanup: %v: %s", err, out)
				}
			}
		}
	}
	if !n.hadKubepods {
		if err := removeCgroupTree("kubepods"); err != nil {
			t.Errorf("real node cleanup: %v", err)
		}
	}
	removeLogLinks(n.dir)
	if t.Failed() {
		t.Logf("real node: logs kept in %s", n.dir)
		for _, sub := range []string{"containerd", "kubelet", "images"} {
			_ = os.RemoveAll(filepath.Join(n.dir, sub))
		}
		return
	}
	if err := os.RemoveAll(n.dir); err != nil {
		t.Errorf("real node cleanup: %v", err)
	}
}

// cgroupRoots are the cgroup hierarchies mounted here (v1 controllers and
// the unified one).
func cgroupRoots() []string {
	ents, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	var roots []string
	for _, e := range ents {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			roots = append(roots, p)
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
		roots = append(roots, "/sys/fs/cgroup")
	}
	return roots
}

// cgroupPIDs lists the processes in the cgroup subtree name of every
// hierarchy.
func cgroupPIDs(name string) []int {
	seen := map[int]bool{}
	for _, root := range cgroupRoots() {
		_ = filepath.WalkDir(filepath.Join(root, name), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p) //nolint:gosec // cgroupfs: only the kernel writes it
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	pids := make([]int, 0, len(seen))
	for p := range seen {
		pids = append(pids, p)
	}
	return pids
}

// removeCgroupTree removes the cgroup subtree name from every hierarchy,
// deepest first. The processes must be gone.
func removeCgroupTree(name string) error {
	var errs []error
	for _, root := range cgroupRoots() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(root, name), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			var err error
			for range 50 { // a killed process leaves its cgroup a moment later
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// shimPIDs finds the containerd shims serving the containerd at sock.
func shimPIDs(sock string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if strings.Contains(argv[0], "containerd-shim") && strings.Contains(string(b), sock) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// unmountUnder lazily unmounts every mount point under dir, deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			points = append(points, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// removeLogLinks removes the kubelet's /var/log/containers links into dir.
func removeLogLinks(dir string) {
	ents, _ := os.ReadDir("/var/log/containers")
	for _, e := range ents {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir) {
			_ = os.Remove(p)
		}
	}
}

// waitPod waits until the pod is Running and Ready, and returns it.
func (n *realNode) waitPod(ctx context.Context, ns, name string, d time.Duration) *corev1.Pod {
	n.t.Helper()
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var pod *corev1.Pod
	err := poll(wctx, 500*time.Millisecond, n.kubelet, func(ctx context.Context) error {
		p, err := n.admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod = p
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s/%s is %s: %s", ns, name, p.Status.Phase, podWhy(p))
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("pod %s/%s not ready: %s", ns, name, podWhy(p))
	})
	if err != nil {
		n.t.Fatalf("waiting for pod: %v", err)
	}
	return pod
}

// podWhy summarises why a pod is not running.
func podWhy(p *corev1.Pod) string {
	var why []string
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			why = append(why, string(c.Type)+": "+c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			why = append(why, cs.Name+" waiting: "+w.Reason+" "+w.Message)
		}
		if tm := cs.LastTerminationState.Terminated; tm != nil {
			why = append(why, fmt.Sprintf("%s last exit %d %s", cs.Name, tm.ExitCode, tm.Reason))
		}
	}
	return strings.Join(why, "; ")
}

// containerID is the containerd ID of the pod's first container.
func containerID(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	return id
}

// execOutput runs a command and returns its combined output.
func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
