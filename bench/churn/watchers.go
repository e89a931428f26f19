package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/miekg/dns"
)

// watcher is one DNS process watching the API server: a nodecache agent or
// a CoreDNS with the kubernetes plugin, serving on addr.
type watcher struct {
	kind string // "nodecache" or "coredns"
	addr string // host:port
	p    *proc
}

// startNodecache starts agent i on 127.0.1.<i+1>:port, as on a node but
// without touching the host: no interface, no iptables rules.
func startNodecache(bin, dir, kubeconfig string, i, port int, extra []string) (*watcher, error) {
	ip := fmt.Sprintf("127.0.1.%d", i+1)
	d := filepath.Join(dir, fmt.Sprintf("nodecache-%d", i))
	if err := os.MkdirAll(d, 0o750); err != nil {
		return nil, fmt.Errorf("creating %s: %w", d, err)
	}
	args := append([]string{"run", "--local-ip", ip, "--port", fmt.Sprint(port),
		"--setup-interface=false", "--setup-iptables=false", "--kubeconfig", kubeconfig,
		"--upstream", "127.0.0.1:9", "--log-level", "warn",
		"--admin-socket", filepath.Join(d, "admin.sock"), "--handover-socket", filepath.Join(d, "handover.sock")}, extra...)
	p, err := startProc(fmt.Sprintf("nodecache-%d", i), dir, bin, args...)
	if err != nil {
		return nil, err
	}
	return &watcher{kind: "nodecache", addr: fmt.Sprintf("%s:%d", ip, port), p: p}, nil
}

// startCoreDNS starts CoreDNS i on 127.0.2.<i+1>:port with the stock
// cluster Corefile's kubernetes block (kubeadm's, without forward, health,
// ready, reload and loop).
func startCoreDNS(bin, dir, kubeconfig string, i, port int, pprof bool) (*watcher, error) {
	ip := fmt.Sprintf("127.0.2.%d", i+1)
	extra := ""
	if pprof {
		extra = "pprof " + ip + ":9253"
	}
	conf := filepath.Join(dir, fmt.Sprintf("Corefile.%d", i))
	corefile := fmt.Sprintf(`.:%d {
    bind %s
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s churn
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    %s
}
`, port, ip, kubeconfig, extra)
	if err := os.WriteFile(conf, []byte(corefile), 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", conf, err)
	}
	p, err := startProc(fmt.Sprintf("coredns-%d", i), dir, bin, "-conf", conf)
	if err != nil {
		return nil, err
	}
	return &watcher{kind: "coredns", addr: fmt.Sprintf("%s:%d", ip, port), p: p}, nil
}

// query asks w for name's A records.
func (w *watcher) query(ctx context.Context, c *dns.Client, name string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	r, _, err := c.ExchangeContext(ctx, m, w.addr)
	return r, err
}

// has reports whether w answers name with address ip.
func (w *watcher) has(ctx context.Context, c *dns.Client, name, ip string) bool {
	r, err := w.query(ctx, c, name)
	if err != nil || r.Rcode != dns.RcodeSuccess {
		return false
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == ip {
			return true
		}
	}
	return false
}

// waitSynced waits until w answers name (the last service loaded) with
// NOERROR and records.
func (w *watcher) waitSynced(ctx context.Context, name string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	c := &dns.Client{Timeout: time.Second}
	for {
		if gone, tail := w.p.exited(); gone {
			return fmt.Errorf("%s exited:\n%s", w.p.name, tail)
		}
		if r, err := w.query(ctx, c, name); err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer %s within %v", w.p.name, name, limit)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
