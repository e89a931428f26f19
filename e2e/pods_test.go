//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodRecordsVerified runs the agent with --pods=verified: a pod record
// exists only while a pod with that IP exists in that namespace. The times
// from pod creation and deletion to the changed answer are logged.
func TestPodRecordsVerified(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{Flags: []string{"--pods=verified"}})
	ns := newNamespace(t, "pods")
	name := func(dashed string) string { return dashed + "." + ns + ".pod." + clusterDomain + "." }
	other := newNamespace(t, "other")

	start := time.Now()
	createPod(t, ns, "p1", "node-1", "", "", "10.244.3.5", "fd00:10:244:3::5")
	d := r.await(t, query{Name: name("10-244-3-5")}, start, hasData(dns.TypeA, "10.244.3.5"))
	t.Logf("pod created with its IP → pod A record: %v", d.Round(time.Millisecond))

	cases := []struct {
		qname, qtype, rcode string
		want                []string
	}{
		{name("10-244-3-5"), "A", "NOERROR", []string{"10.244.3.5"}},
		{name("fd00-10-244-3--5"), "AAAA", "NOERROR", []string{"fd00:10:244:3::5"}},
		{name("10-244-3-6"), "A", "NXDOMAIN", nil},
		{"10-244-3-5." + other + ".pod." + clusterDomain + ".", "A", "NXDOMAIN", nil},
	}
	for _, c := range cases {
		a := r.ask(t, query{Name: c.qname, Type: c.qtype})
		if got := a.Data(dnsType(t, c.qtype)); a.Rcode != c.rcode || !equalSorted(got, c.want) {
			t.Errorf("%s %s: got %v, want %s %v", c.qname, c.qtype, a, c.rcode, c.want)
		}
	}

	start = time.Now()
	zero := int64(0)
	if err := env.api.Admin.CoreV1().Pods(ns).Delete(apiCtx(t), "p1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("deleting pod: %v", err)
	}
	d = r.await(t, query{Name: name("10-244-3-5")}, start, hasRcode("NXDOMAIN"))
	t.Logf("pod deleted → NXDOMAIN: %v", d.Round(time.Millisecond))
}
