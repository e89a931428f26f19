//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Clients Kubernetes' suite does not cover: a headless Service with more
// endpoints than fit a 512-byte UDP answer, looked up by three resolvers
// in a pod of the real node. glibc and Go retry a truncated answer over
// TCP; musl before 1.2.4 (Alpine before 3.18) keeps what the UDP answer
// holds, so it gets only as many addresses as the agent fits in whole
// records, and none from a server that sends header and question only.

const (
	truncationNS    = "truncation"
	truncationSvc   = "many"
	truncationCount = 300
	resolversImage  = "docker.io/nodecache-e2e/resolvers:1"
)

// TestTruncatedClients: with the DaemonSet installed and a 300-endpoint
// headless Service, glibc's getent and Go's resolver get all 300 addresses;
// musl 1.2.3's getaddrinfo gets some but not all, exactly the A records of
// the agent's own truncated (TC) answer to a query without EDNS, each one
// an endpoint.
func TestTruncatedClients(t *testing.T) {
	if _, err := exec.LookPath("musl-gcc"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no musl-gcc (Debian's musl-tools): %v", err)
		}
		t.Skipf("SKIPPING (set CI=true to make this a failure): no musl-gcc (Debian's musl-tools): %v", err)
	}
	n := sharedRealNode(t)
	ctx := t.Context()
	n.importTars(ctx, []string{buildResolversImage(t, mkdir(t, n.dir, "images-resolvers"))})
	n.installAgent(t)
	n.namespace(t, truncationNS)
	ips := n.createManyEndpoints(t, truncationCount)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "resolvers"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "resolvers", Image: resolversImage, ImagePullPolicy: corev1.PullNever}},
		},
	}
	if _, err := n.admin.CoreV1().Pods(truncationNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := n.waitPod(ctx, truncationNS, pod.Name, 2*time.Minute)
	fqdn := truncationSvc + "." + truncationNS + ".svc.cluster.local."

	lookup := func(argv ...string) []string {
		out, err := n.exec(ctx, p, argv...)
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(argv, " "), err)
		}
		return uniqueIPv4(out)
	}
	var glibc []string
	eventuallyWithin(t, time.Minute, "the agent's zone holding every endpoint", func() error {
		glibc = lookup("getent", "ahostsv4", fqdn)
		if len(glibc) != truncationCount {
			return fmt.Errorf("glibc getent: %d addresses", len(glibc))
		}
		return nil
	})
	goRes := lookup("/usr/local/bin/resolve", fqdn)
	musl := lookup("/usr/local/bin/gai-musl", fqdn)
	udp, tc := n.udpAnswerNoEDNS(t, fqdn)
	t.Logf("%s (%d endpoints): glibc getent %d, Go %d, musl 1.2.3 %d; the agent's UDP answer without EDNS: %d A records, TC %v",
		fqdn, truncationCount, len(glibc), len(goRes), len(musl), len(udp), tc)

	if !slices.Equal(glibc, ips) {
		t.Errorf("glibc getent: got %d addresses, want the %d endpoints", len(glibc), len(ips))
	}
	if !slices.Equal(goRes, ips) {
		t.Errorf("Go resolver: got %d addresses, want the %d endpoints", len(goRes), len(ips))
	}
	if !tc || len(udp) == 0 || len(udp) >= truncationCount {
		t.Errorf("the agent's UDP answer: %d A records with TC %v, want some whole records with TC", len(udp), tc)
	}
	if len(musl) == 0 {
		t.Errorf("musl got no address: the truncated answer carried no record")
	}
	if !slices.Equal(musl, udp) {
		t.Errorf("musl got %v, want the %d addresses of the agent's truncated answer %v", musl, len(udp), udp)
	}
	for _, ip := range musl {
		if _, ok := slices.BinarySearch(ips, ip); !ok {
			t.Errorf("musl got %s, which is no endpoint", ip)
		}
	}
}

// buildResolversImage builds the three clients' image into dir: gai built
// with musl-gcc -static (musl 1.2.3 on Debian 12), resolve (Go, static) and
// the host's glibc getent with its libraries.
func buildResolversImage(t *testing.T, dir string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	gai, res := filepath.Join(dir, "gai-musl"), filepath.Join(dir, "resolve")
	for _, c := range [][]string{
		{"musl-gcc", "-static", "-O2", "-Wall", "-o", gai, filepath.Join(root, "e2e", "tools", "gai", "gai.c")},
		{"go", "build", "-o", res, "./e2e/tools/resolve"},
	} {
		cmd := exec.CommandContext(t.Context(), c[0], c[1:]...) //nolint:gosec // fixed tools
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	files, err := hostFilesWithLibs("/usr/bin/getent")
	if err != nil {
		t.Fatal(err)
	}
	nsswitch := writeRigFile(t, filepath.Join(dir, "nsswitch.conf"), "hosts: files dns\n")
	files = append(files, imageFile{Src: gai, Dst: "/usr/local/bin/gai-musl"}, imageFile{Src: res, Dst: "/usr/local/bin/resolve"},
		imageFile{Src: nsswitch, Dst: "/etc/nsswitch.conf"})
	tars, err := writeImages(dir, []imageSpec{{Ref: resolversImage, Files: files,
		Entrypoint: []string{"/usr/local/bin/resolve"}, Cmd: []string{"-wait"}}})
	if err != nil {
		t.Fatal(err)
	}
	return tars[0]
}

// createManyEndpoints creates the headless Service and one EndpointSlice of
// count ready endpoints, and returns their IPs sorted as strings.
func (n *realNode) createManyEndpoints(t *testing.T, count int) []string {
	t.Helper()
	ctx := t.Context()
	c := n.admin
	if _, err := c.CoreV1().Services(truncationNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: truncationSvc},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ips []string
	var eps []discoveryv1.Endpoint
	for i := range count {
		ip := fmt.Sprintf("10.246.%d.%d", 1+i/250, 1+i%250)
		ips = append(ips, ip)
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	if _, err := c.DiscoveryV1().EndpointSlices(truncationNS).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: truncationSvc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: truncationSvc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ips)
	return ips
}

// udpAnswerNoEDNS asks the agent for name's A records over UDP without
// EDNS, as musl does, from the node, and returns the addresses of the
// answer (sorted as strings) and its TC bit.
func (n *realNode) udpAnswerNoEDNS(t *testing.T, name string) ([]string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := n.ns.dial(ctx, "udp", net.JoinHostPort(linkLocalIP, "53"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	wire, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(wire); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65535)
	nr, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("the agent's UDP answer for %s: %v", name, err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:nr]); err != nil {
		t.Fatalf("the agent's UDP answer for %s (%d bytes): %v", name, nr, err)
	}
	if nr > dns.MinMsgSize {
		t.Errorf("the agent's UDP answer to a query without EDNS: %d bytes, over %d", nr, dns.MinMsgSize)
	}
	var ips []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	slices.Sort(ips)
	return ips, r.Truncated
}

// uniqueIPv4 picks the distinct IPv4 addresses that begin the lines of out
// (getent ahostsv4 prints each three times), sorted as strings.
func uniqueIPv4(out string) []string {
	seen := map[string]bool{}
	var ips []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if ip := net.ParseIP(f[0]); ip != nil && ip.To4() != nil && !seen[f[0]] {
			seen[f[0]] = true
			ips = append(ips, f[0])
		}
	}
	slices.Sort(ips)
	return ips
}
