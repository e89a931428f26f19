//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

var (
	dnsperfCompletedRe = regexp.MustCompile(`Queries completed:\s+(\d+)`)
	dnsperfQPSRe       = regexp.MustCompile(`Queries per second:\s+([\d.]+)`)
	dnsperfLatencyRe   = regexp.MustCompile(`Average Latency \(s\):\s+([\d.]+)`)
	// "  Response codes:       NOERROR 9000 (90.00%), NXDOMAIN 1000 (10.00%)"
	dnsperfRcodesRe = regexp.MustCompile(`Response codes:\s+(.*)`)
	dnsperfRcodeRe  = regexp.MustCompile(`([A-Z]+) \d+ \(`)
)

// TestLoadThroughLinkLocal drives the agent with dnsperf from a pod netns,
// over the veth and the link-local IP, with a mix of cluster and cached
// external names. Throughput and latency are logged, not asserted; the test
// fails on any rcode the names should not get.
func TestLoadThroughLinkLocal(t *testing.T) {
	requireSuite(t)
	if _, err := exec.LookPath("dnsperf"); err != nil {
		t.Fatalf("dnsperf is needed: %v", err)
	}
	r := newAgentRig(t, agentOpts{})
	ns := newNamespace(t, "load")
	svc := createService(t, serviceSpec(ns, "web", corev1.ServiceTypeClusterIP, true))
	fqdn := "web." + ns + ".svc." + clusterDomain + "."
	r.await(t, query{Name: fqdn}, time.Now(), hasData(dns.TypeA, svc.Spec.ClusterIPs[0]))
	names := []string{fqdn + " A", fqdn + " AAAA", "www.example.com. A", "www.example.com. AAAA", "nope." + ns + ".svc." + clusterDomain + ". A"}
	data := filepath.Join(t.TempDir(), "queries")
	if err := os.WriteFile(data, []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"udp", "tcp"} {
		t.Run(mode, func(t *testing.T) {
			argv := []string{"netns", "exec", r.pod.NS.Name, "dnsperf", "-m", mode, "-s", linkLocalIP,
				"-d", data, "-l", "3", "-c", "4", "-q", "64", "-t", "2"}
			out, err := exec.CommandContext(t.Context(), "ip", argv...).CombinedOutput()
			if err != nil {
				t.Fatalf("dnsperf: %v\n%s", err, out)
			}
			s := string(out)
			completed := firstMatch(dnsperfCompletedRe, s)
			if completed == "" || completed == "0" {
				t.Fatalf("dnsperf over %s: got %q queries completed, want some\n%s", mode, completed, s)
			}
			for _, m := range dnsperfRcodeRe.FindAllStringSubmatch(firstMatch(dnsperfRcodesRe, s), -1) {
				if m[1] != "NOERROR" && m[1] != "NXDOMAIN" {
					t.Errorf("dnsperf over %s: got rcode %s among the answers, want only NOERROR and NXDOMAIN\n%s", mode, m[1], s)
				}
			}
			t.Logf("dnsperf -m %s -c 4 -q 64 -l 3 via %s from a pod netns: %s queries, %s qps, average latency %s s",
				mode, linkLocalIP, completed, firstMatch(dnsperfQPSRe, s), firstMatch(dnsperfLatencyRe, s))
		})
	}
}

func firstMatch(re *regexp.Regexp, s string) string {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1]
}
