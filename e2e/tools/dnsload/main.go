// Command dnsload is the e2e node's client pod: it sends a steady stream of
// DNS queries over UDP and over TCP (one query per fresh TCP connection, as a
// stub resolver's fallback does) and prints one JSON line a second with that
// second's outcome and latency histogram, until SIGTERM.
//
//	dnsload -server 169.254.20.10:53 -qps 50 -names web.default.svc.cluster.local.,A
//	dnsload -resolv-conf /etc/resolv.conf ...   # the first nameserver there, port 53
//
// A query is lost when no reply arrives within -timeout. A UDP query is sent
// once, never retried, so a loss is visible rather than hidden by a retry.
// A TCP query whose connection is reset or closed before the reply is sent
// again once on a new connection within what is left of -timeout, as a
// stub resolver does, and counted apart (resent), so a test can allow it
// where a process was killed and refuse it everywhere else.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/e2e/tools/dnsload/loadrec"
)

// second is one second's outcome for one protocol, as it is written, plus
// the first error seen while it is filled.
type second struct {
	loadrec.Second
	firstErr string
}

type name struct {
	fqdn  string
	qtype uint16
}

func main() {
	server := flag.String("server", "169.254.20.10:53", "DNS server")
	resolvConf := flag.String("resolv-conf", "", "ask the first nameserver of this file (port 53) instead of -server")
	qps := flag.Int("qps", 50, "queries a second per protocol")
	timeout := flag.Duration("timeout", 2*time.Second, "a query with no reply after this is lost")
	namesFlag := flag.String("names", "kubernetes.default.svc.cluster.local.,A", "semicolon-separated NAME,TYPE list, queried in turn")
	protos := flag.String("protos", "udp,tcp", "protocols to send on")
	cat := flag.String("cat", "", "print this file and exit (the client image has no cat)")
	flag.Parse()
	if *cat != "" {
		b, err := os.ReadFile(*cat)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dnsload:", err)
			os.Exit(1)
		}
		_, _ = os.Stdout.Write(b)
		return
	}
	if *resolvConf != "" {
		s, err := firstNameserver(*resolvConf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dnsload:", err)
			os.Exit(1)
		}
		*server = s
		fmt.Fprintf(os.Stderr, "dnsload: asking %s, the first nameserver of %s\n", s, *resolvConf)
	}
	var names []name
	for _, s := range strings.Split(*namesFlag, ";") {
		n, t, _ := strings.Cut(s, ",")
		qt, ok := dns.StringToType[strings.ToUpper(t)]
		if !ok {
			fmt.Fprintf(os.Stderr, "dnsload: unknown type %q in %q\n", t, s)
			os.Exit(2)
		}
		names = append(names, name{dns.Fqdn(n), qt})
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	out := json.NewEncoder(os.Stdout)
	var outMu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range strings.Split(*protos, ",") {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(ctx, p, *server, names, *qps, *timeout, func(s *second) {
				outMu.Lock()
				defer outMu.Unlock()
				_ = out.Encode(s)
			})
		}()
	}
	wg.Wait()
}

// firstNameserver is the first nameserver line of a resolv.conf, as ip:53.
func firstNameserver(path string) (string, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the pod's own resolv.conf, named by the test
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			return net.JoinHostPort(f[1], "53"), nil
		}
	}
	return "", fmt.Errorf("%s has no nameserver line", path)
}

// run sends qps queries a second on proto until ctx ends, and reports each
// second once all its queries have finished.
func run(ctx context.Context, proto, server string, names []name, qps int, timeout time.Duration, report func(*second)) {
	client := &dns.Client{Net: proto, Timeout: timeout}
	tick := time.NewTicker(time.Second / time.Duration(qps))
	defer tick.Stop()
	var (
		mu   sync.Mutex
		cur  *second
		wg   *sync.WaitGroup // cur's queries
		i    int
		secs sync.WaitGroup
	)
	flush := func(s *second, w *sync.WaitGroup) {
		defer secs.Done()
		w.Wait()
		mu.Lock()
		s.Err = s.firstErr
		mu.Unlock()
		report(s)
	}
	start := func(now time.Time) {
		cur = &second{Second: loadrec.Second{T: now.Unix(), Proto: proto, Rcodes: map[string]int{}, Buckets: map[int]int{}}}
		wg = new(sync.WaitGroup)
	}
	start(time.Now())
	for {
		select {
		case <-ctx.Done():
			secs.Add(1)
			go flush(cur, wg)
			secs.Wait()
			return
		case now := <-tick.C:
			if now.Unix() != cur.T {
				secs.Add(1)
				go flush(cur, wg)
				start(now)
			}
			n := names[i%len(names)]
			i++
			s, w := cur, wg
			s.Sent++
			w.Add(1)
			go func() {
				defer w.Done()
				m := new(dns.Msg)
				m.SetQuestion(n.fqdn, n.qtype)
				t0 := time.Now()
				r, _, err := client.Exchange(m, server)
				resent := false
				if err != nil && proto == "tcp" && !isTimeout(err) {
					if left := timeout - time.Since(t0); left > 0 {
						again := &dns.Client{Net: proto, Timeout: left}
						if r2, _, err2 := again.Exchange(m, server); err2 == nil {
							r, err, resent = r2, nil, true
						}
					}
				}
				d := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				if resent {
					s.Resent++
				}
				switch {
				case err != nil && isTimeout(err):
					s.Lost++
					if s.firstErr == "" {
						s.firstErr = err.Error()
					}
				case err != nil:
					s.Rcodes["error"]++
					if s.firstErr == "" {
						s.firstErr = err.Error()
					}
				case r.Rcode != dns.RcodeSuccess:
					s.Rcodes[dns.RcodeToString[r.Rcode]]++
					s.Buckets[loadrec.BucketOf(d)]++
				default:
					s.OK++
					s.Buckets[loadrec.BucketOf(d)]++
				}
			}()
		}
	}
}

func isTimeout(err error) bool {
	type timeout interface{ Timeout() bool }
	t, ok := err.(timeout)
	return ok && t.Timeout()
}
