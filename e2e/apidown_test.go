//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

// TestAPIServerUnreachable starts the agent while its path to the apiserver
// is cut: it must serve external names, answer SERVFAIL (never a false
// NXDOMAIN) for the cluster zone and report not ready; once the apiserver is
// reachable it syncs and answers. The time from reconnection to the first
// cluster answer is logged.
func TestAPIServerUnreachable(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{APIDown: true})
	ns := newNamespace(t, "down")
	svc := createService(t, serviceSpec(ns, "web", corev1.ServiceTypeClusterIP, false))
	fqdn := "web." + ns + ".svc." + clusterDomain + "."

	cases := []struct {
		qname, rcode string
	}{
		{fqdn, "SERVFAIL"},
		{"nope." + ns + ".svc." + clusterDomain + ".", "SERVFAIL"},
		{"www.example.com.", "NOERROR"},
	}
	for _, c := range cases {
		for _, tcp := range []bool{false, true} {
			if a := r.ask(t, query{Name: c.qname, TCP: tcp}); a.Rcode != c.rcode {
				t.Errorf("%s (tcp=%v) with the apiserver unreachable: got %v, want %s", c.qname, tcp, a, c.rcode)
			}
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := httpOK(ctx, r.agent.http, "http://"+healthAddr+"/readyz", ""); err == nil {
		t.Errorf("/readyz with the apiserver unreachable: got 200, want an error status")
	}

	start := time.Now()
	r.agent.API.Resume()
	d := r.await(t, query{Name: fqdn}, start, hasData(dns.TypeA, svc.Spec.ClusterIP))
	t.Logf("apiserver reachable → first cluster answer: %v (client-go retry backoff included)", d.Round(time.Millisecond))
	r.agent.waitHTTP(t, "/readyz")
	if a := r.ask(t, query{Name: cases[1].qname}); a.Rcode != "NXDOMAIN" {
		t.Errorf("%s after sync: got %v, want NXDOMAIN", cases[1].qname, a)
	}

	// Losing the apiserver after sync keeps the zone being served.
	r.agent.API.Pause()
	if a := r.ask(t, query{Name: fqdn}); a.Rcode != "NOERROR" || !slices.Equal(a.Data(dns.TypeA), []string{svc.Spec.ClusterIP}) {
		t.Errorf("%s after losing the apiserver: got %v, want NOERROR [%s]", fqdn, a, svc.Spec.ClusterIP)
	}
}
