//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kubernetes' own DNS conformance tests: e2e.test v1.35.4 (built by
// e2e/tools/build-k8s.sh) with --ginkgo.focus '[sig-network] DNS' against
// the shared real node, the cluster DNS at 169.254.20.10 being the
// DaemonSet (or, with NODECACHE_CONFORMANCE_DNS=coredns, CoreDNS as a
// host-network pod on that IP, for the comparison column of
// docs/conformance.md). `make conformance` runs just this test.

const (
	conformanceFocus = `\[sig-network\] DNS`
	// What cannot run on one node without a cloud, or needs an alpha
	// feature gate; docs/conformance.md lists each spec this skips.
	conformanceSkip = `\[Provider:GCE\]|\[Serial\]|\[Slow\]|\[Feature:|\[Alpha\]`
	// The whole e2e.test run; a warm run takes a few minutes.
	conformanceTimeout = 25 * time.Minute
)

// TestConformance runs e2e.test's DNS tests and wants every spec the focus
// selects and the skip leaves to pass, every [Conformance] one among them,
// and every skipped one listed in docs/conformance.md. A broken setup (an
// image or tool missing, a pod that does not run) fails within minutes,
// not after the suite's 600 s waits.
func TestConformance(t *testing.T) {
	bin := requireRealNode(t)
	e2eTest, agnhost, coredns := filepath.Join(bin, "e2e.test"), filepath.Join(bin, "agnhost"), corednsPath()
	var missing []string
	for _, p := range []string{e2eTest, agnhost, coredns} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("the DNS conformance run needs %s (e2e/tools/build-k8s.sh builds e2e.test and agnhost, bench/build-coredns.sh CoreDNS)", strings.Join(missing, ", "))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING (set CI=true to make this a failure): " + msg)
	}
	provider := os.Getenv("NODECACHE_CONFORMANCE_DNS")
	if provider == "" {
		provider = "nodecache"
	}
	if provider != "nodecache" && provider != "coredns" {
		t.Fatalf("NODECACHE_CONFORMANCE_DNS=%q: want nodecache or coredns", provider)
	}
	reportDir, err := conformanceReportDir()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stage := func(what string) {
		t.Logf("conformance: %s (+%v)", what, time.Since(start).Round(100*time.Millisecond))
	}

	n := sharedRealNode(t)
	ctx := t.Context()
	stage("real node up")
	n.importConformanceImages(t, ctx, agnhost, coredns)
	stage("images " + conformanceAgnhost + " and " + conformanceJessie + " imported")
	// requests is the cluster DNS's own count of the queries it answered.
	var requests func() float64
	switch provider {
	case "nodecache":
		port := n.installAgent(t)
		requests = func() float64 { return n.agentRequests(port) }
	case "coredns":
		n.startLinkLocalCoreDNS(t, coredns)
		requests = func() float64 { return n.corednsRequests(t) }
	}
	stage(provider + " serving " + linkLocalIP + " as the cluster DNS")
	n.conformancePreflight(t)
	stage("preflight pod: both images run their tools and resolve through " + provider)

	before := requests()
	junit := n.runE2ETest(t, e2eTest, reportDir)
	stage("e2e.test done")
	if after := requests(); after <= before {
		t.Errorf("%s counted %v requests before e2e.test and %v after: the suite's queries did not reach it", provider, before, after)
	} else {
		t.Logf("%s answered %v requests during e2e.test", provider, after-before)
	}
	res, err := readJUnit(junit)
	if err != nil {
		t.Fatal(err)
	}
	documented, err := documentedSkips("../docs/conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.problems(documented) {
		t.Error(p)
	}
	t.Logf("conformance with %s as cluster DNS: %s\nJUnit: %s", provider, res.summary(), junit)
}

// corednsPath is the CoreDNS binary: $NODECACHE_COREDNS, else the bench's.
func corednsPath() string {
	if p := os.Getenv("NODECACHE_COREDNS"); p != "" {
		return p
	}
	return corednsBin
}

// conformanceReportDir is $CONFORMANCE_REPORT_DIR, else _output/conformance
// at the repository's root, made absolute and created.
func conformanceReportDir() (string, error) {
	dir := os.Getenv("CONFORMANCE_REPORT_DIR")
	if dir == "" {
		dir = filepath.Join("..", "_output", "conformance")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// runE2ETest runs e2e.test as the cluster's admin, its output into
// e2e.log in dir, and returns the JUnit file it wrote. A pod of the suite
// that cannot run (an image missing, a container that cannot start or
// keeps crashing) ends the run at once.
func (n *realNode) runE2ETest(t *testing.T, e2eTest, dir string) string {
	t.Helper()
	junit := filepath.Join(dir, "junit_01.xml")
	_ = os.Remove(junit)
	logPath := filepath.Join(dir, "e2e.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(t.Context(), conformanceTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2eTest,
		"--kubeconfig="+n.api.AdminKubeconfig, "--provider=skeleton",
		"--ginkgo.focus="+conformanceFocus, "--ginkgo.skip="+conformanceSkip,
		"--ginkgo.no-color", "--ginkgo.v", "--ginkgo.timeout="+conformanceTimeout.String(),
		"--report-dir="+dir, "--disable-log-dump", "--dump-logs-on-failure=false",
		"--e2e-output-dir="+filepath.Join(dir, "output"))
	cmd.Dir = dir
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var lines sync.WaitGroup
	lines.Add(1)
	go func() { // the log file, and each spec's verdict into the test log
		defer lines.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if strings.HasPrefix(line, "•") {
				t.Logf("e2e.test: %s", line)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	stuck := make(chan string, 1)
	go n.watchSuitePods(ctx, stuck, cancel)
	t.Logf("running %s (log %s)", strings.Join(cmd.Args, " "), logPath)
	runErr := cmd.Run()
	_ = pw.Close()
	lines.Wait()
	select {
	case why := <-stuck:
		t.Fatalf("e2e.test stopped: %s (log %s)", why, logPath)
	default:
	}
	if _, err := os.Stat(junit); err != nil {
		t.Fatalf("e2e.test wrote no JUnit report (%v; exit: %v); log %s:\n%s", err, runErr, logPath, fileTail(logPath, 6000))
	}
	if runErr != nil {
		t.Logf("e2e.test: %v (the JUnit report says which specs failed); log %s", runErr, logPath)
	}
	return junit
}

// stuckReasons are container states no DNS test recovers from.
var stuckReasons = map[string]bool{
	"ErrImageNeverPull": true, "ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerError": true, "CreateContainerConfigError": true, "RunContainerError": true, "CrashLoopBackOff": true,
}

// watchSuitePods polls the suite's pods (every namespace but kube-system
// and the rig's) and, when a container is stuck for good, sends why on
// stuck and cancels the run.
func (n *realNode) watchSuitePods(ctx context.Context, stuck chan<- string, cancel context.CancelFunc) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pods, err := n.admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Namespace == agentNS || p.Namespace == conformancePreflightNS {
				continue
			}
			if why := stuckContainer(p); why != "" {
				stuck <- fmt.Sprintf("pod %s/%s cannot run: %s", p.Namespace, p.Name, why)
				cancel()
				return
			}
		}
	}
}

// stuckContainer names a container of p that is stuck for good, if any.
func stuckContainer(p *corev1.Pod) string {
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && stuckReasons[w.Reason] {
			return fmt.Sprintf("container %s (%s) waiting: %s %s", cs.Name, cs.Image, w.Reason, w.Message)
		}
		if tm := cs.LastTerminationState.Terminated; tm != nil && tm.ExitCode == 127 {
			return fmt.Sprintf("container %s (%s) exited 127 (a command not found in the image)", cs.Name, cs.Image)
		}
	}
	return ""
}

// fileTail returns the last max bytes of a file.
func fileTail(path string, max int) string {
	b, err := os.ReadFile(path) //nolint:gosec // the test's own log
	if err != nil {
		return err.Error()
	}
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// TestStuckContainer: the states that end a conformance run, and ones that
// do not (a container still being created, or one that exited with its
// own error).
func TestStuckContainer(t *testing.T) {
	waiting := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "c", Image: "img", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	}
	exited := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "c", Image: "img", LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	for _, tc := range []struct {
		status corev1.ContainerStatus
		stuck  bool
	}{
		{waiting("ErrImageNeverPull"), true},
		{waiting("ImagePullBackOff"), true},
		{waiting("CrashLoopBackOff"), true},
		{waiting("ContainerCreating"), false},
		{exited(127), true},
		{exited(1), false},
		{corev1.ContainerStatus{Name: "c"}, false},
	} {
		p := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{tc.status}}}
		if got := stuckContainer(p); (got != "") != tc.stuck {
			t.Errorf("%+v: got %q, want stuck %v", tc.status, got, tc.stuck)
		}
	}
}
