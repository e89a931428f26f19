package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/agent/agenttest"
)

// compareCorefile is served by CoreDNS as it is and, translated by
// nodecache migrate, by nodecache; both must answer alike. {$PORT} is
// the listening port (53 for migrate), {$U1} a plain upstream, {$U2} a
// TCP-only corporate resolver, {$U3} a DNS over TLS server and {$CA} its CA.
const compareCorefile = `.:{$PORT} {
    bind 127.0.0.1
    errors
    hosts {
        10.0.0.5 db.example.internal
        fallthrough
    }
    rewrite name orders.example.com www.example.org
    forward . 127.0.0.1:{$U1}
    cache 30
}
corp.example.com:{$PORT} {
    bind 127.0.0.1
    forward . 127.0.0.1:{$U2} {
        force_tcp
    }
    cache {
        success 1000 120
        denial 1000 10
    }
}
secure.example:{$PORT} {
    bind 127.0.0.1
    forward . tls://127.0.0.1:{$U3} {
        tls_servername dns.test
        tls {$CA}
    }
    cache 30
}
`

// corednsBinary is CoreDNS v1.15.0 as bench/run.sh builds it, or
// $NODECACHE_COREDNS.
func corednsBinary() string {
	if p := os.Getenv("NODECACHE_COREDNS"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "nodecache-bench", "bin", "coredns-v1.15.0")
}

// startCompareUpstreams starts the three upstreams and returns the
// Corefile variables for them.
func startCompareUpstreams(t *testing.T, dir string) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for name, h := range map[string]dns.HandlerFunc{"U1": agenttest.Authoritative("192.0.2.7", false), "U2": agenttest.Authoritative("10.20.0.7", true)} {
		port := agenttest.FreePort(t)
		pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		agenttest.Serve(t, &dns.Server{PacketConn: pc, Handler: h})
		agenttest.Serve(t, &dns.Server{Listener: ln, Handler: h})
		vars[name] = fmt.Sprint(port)
	}
	ln, caFile := agenttest.StartDoTServer(t, dir, nil, agenttest.Authoritative("198.51.100.7", false))
	vars["U3"] = fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	vars["CA"] = caFile
	return vars
}

// TestMigrateMatchesCoreDNS runs CoreDNS with a Corefile of typical
// customisations (hosts with fallthrough, rewrite name, a TCP-only
// corporate resolver with its own cache caps, a DNS over TLS upstream)
// and nodecache with what migrate makes of it, asks both the same
// questions and compares rcodes, records and TTLs.
func TestMigrateMatchesCoreDNS(t *testing.T) {
	bin := corednsBinary()
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no CoreDNS binary (%v), and CI=true forbids skipping: make test builds it with bench/build-coredns.sh", err)
		}
		t.Skipf("SKIPPING: no CoreDNS binary (%v): run bench/build-coredns.sh, or set NODECACHE_COREDNS", err)
	}
	dir := t.TempDir()
	vars := startCompareUpstreams(t, dir)

	// nodecache: migrate the Corefile, run the config on loopback.
	corefilePath := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(corefilePath, []byte(compareCorefile), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--corefile", corefilePath, "-o", filepath.Join(dir, "nodecache.yaml"), "--var", "PORT=53"}
	for k, v := range vars {
		args = append(args, "--var", k+"="+v)
	}
	var stderr bytes.Buffer
	if err := runMigrate(context.Background(), args, migrateEnv{stdout: &stderr, stderr: &stderr, client: noCluster}); err != nil {
		t.Fatalf("migrate: %v\n%s", err, stderr.String())
	}
	ncPort := agenttest.FreePort(t)
	ncArgs := agenttest.Args(t, netip.MustParseAddrPort("127.0.0.1:"+vars["U1"]), dir, ncPort, "--config", filepath.Join(dir, "nodecache.yaml"))
	startAgentArgs(t, agenttest.WithoutFlag(agenttest.WithoutFlag(ncArgs, "--upstream"), "--fixture"))

	// CoreDNS: the same Corefile on another loopback port.
	cdPort := agenttest.FreePort(t)
	cmd := exec.Command(bin, "-conf", corefilePath, "-quiet")
	cmd.Env = append(os.Environ(), "PORT="+fmt.Sprint(cdPort))
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var cdOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &cdOut, &cdOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	cdAddr := fmt.Sprintf("127.0.0.1:%d", cdPort)
	agenttest.WaitFor(t, "CoreDNS to answer", func() bool {
		m := new(dns.Msg)
		m.SetQuestion("ready.example.org.", dns.TypeA)
		_, _, err := (&dns.Client{Timeout: 200 * time.Millisecond}).Exchange(m, cdAddr)
		return err == nil
	})

	ncAddr := fmt.Sprintf("127.0.0.1:%d", ncPort)
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"db.example.internal.", dns.TypeA},
		{"db.example.internal.", dns.TypeAAAA},
		{"www.example.org.", dns.TypeA},
		{"nx.example.org.", dns.TypeA},
		{"orders.example.com.", dns.TypeA},
		{"x.corp.example.com.", dns.TypeA},
		{"nx.corp.example.com.", dns.TypeA},
		{"a.secure.example.", dns.TypeA},
		{"nx.secure.example.", dns.TypeA},
		{"5.0.0.10.in-addr.arpa.", dns.TypePTR},
		{"www.example.org.", dns.TypeAAAA},
		{"DB.Example.Internal.", dns.TypeA},
	} {
		want, got := summary(t, cdAddr, q.name, q.qtype), summary(t, ncAddr, q.name, q.qtype)
		if got != want {
			t.Errorf("%s %s:\n  CoreDNS:   %s\n  nodecache: %s", q.name, dns.TypeToString[q.qtype], want, got)
		}
	}
	if t.Failed() {
		t.Logf("CoreDNS output:\n%s\nmigrate stderr:\n%s", cdOut.String(), stderr.String())
	}
}

// summary is what a client sees of an answer: rcode, flags that matter,
// and the records of the answer and authority sections (TTLs included,
// rounded to the nearest 5s, so that a cache entry a second old on one
// side does not count), sorted. nodecache writes the asker's spelling of
// the name into the records that point at the question, CoreDNS the
// spelling it cached: the same name, so case is ignored.
func summary(t *testing.T, addr, name string, qtype uint16) string {
	t.Helper()
	r := agenttest.Ask(t, addr, name, qtype)
	var rrs []string
	for _, sec := range [][]dns.RR{r.Answer, r.Ns} {
		for _, rr := range sec {
			rr = dns.Copy(rr)
			rr.Header().Ttl = (rr.Header().Ttl + 2) / 5 * 5
			rrs = append(rrs, strings.ToLower(rr.String())) // names compare case-insensitively
		}
	}
	sort.Strings(rrs)
	return fmt.Sprintf("%s question=%s [%s]", dns.RcodeToString[r.Rcode], r.Question[0].Name, strings.Join(rrs, " | "))
}
