//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// loadName is one question of a load mix and the rcode it must get.
type loadName struct {
	Name  string // FQDN
	Type  uint16
	Rcode int
}

// Outcomes of one load query.
const (
	loadOK       = "ok"       // the wanted rcode
	loadLost     = "lost"     // no reply within the timeout
	loadRefused  = "refused"  // ICMP port unreachable: nothing listened
	loadServFail = "servfail" // SERVFAIL where something else was wanted
	loadWrong    = "wrong"    // another wrong rcode, or a reply to another question
)

// loadResult is one query of a load run.
type loadResult struct {
	Sent    time.Time
	RTT     time.Duration // valid when Outcome is not loadLost
	Outcome string
	Detail  string // for anything but loadOK: what came back
}

// loadRun is a paced UDP load from inside a netns, one connected socket per
// worker, each worker sending its next query when the last one is answered
// or timed out. Unlike dnsperf it keeps every query's send time, latency and
// outcome, so that a window (a handover, a restart) can be looked at alone.
type loadRun struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards following
	results []loadResult
	err     error // the first socket error that stopped a worker
}

// startLoad sends names round-robin to server (ip:port) from ns at about qps
// queries per second over workers sockets, until stop. A reply later than
// timeout counts as lost.
func startLoad(t testing.TB, ns *netNS, server string, names []loadName, qps, workers int, timeout time.Duration) *loadRun {
	t.Helper()
	return startLoadNet(t, ns, "udp", server, names, qps, workers, timeout)
}

// startLoadNet is startLoad over network: "udp" (a connected socket per
// worker) or "tcp" (a new connection per query, as a stub resolver falling
// back to TCP does).
func startLoadNet(t testing.TB, ns *netNS, network, server string, names []loadName, qps, workers int, timeout time.Duration) *loadRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &loadRun{cancel: cancel}
	interval := time.Duration(float64(time.Second) * float64(workers) / float64(qps))
	start := time.Now()
	for w := range workers {
		var c net.Conn
		if network == "udp" {
			var err error
			if c, err = ns.dial(ctx, "udp", server); err != nil {
				cancel()
				l.wg.Wait()
				t.Fatalf("load socket in %s: %v", ns.Name, err)
			}
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if c != nil {
				defer c.Close()
			}
			next := start.Add(interval * time.Duration(w) / time.Duration(workers))
			for i := w; ctx.Err() == nil; i += workers {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				next = next.Add(interval)
				if now := time.Now(); next.Before(now) {
					next = now // fell behind: do not burst to catch up
				}
				var r loadResult
				var err error
				if network == "tcp" {
					r, err = exchangeTCP(ctx, ns, server, names[i%len(names)], timeout)
				} else {
					r, err = exchangeOnce(c, names[i%len(names)], timeout)
				}
				if errors.Is(err, errLoadStopped) {
					return // stop() came while this query was being set up
				}
				if err != nil {
					l.fail(err)
					return
				}
				l.mu.Lock()
				l.results = append(l.results, r)
				l.mu.Unlock()
			}
		}()
	}
	t.Cleanup(func() { l.stop() })
	return l
}

func (l *loadRun) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

// stop ends the run, waits for every worker (each finishes the query it has
// in flight) and returns the results in send order. It is idempotent.
func (l *loadRun) stop() ([]loadResult, error) {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.SortFunc(l.results, func(a, b loadResult) int { return a.Sent.Compare(b.Sent) })
	return slices.Clone(l.results), l.err
}

// answered returns how many queries sent at or after since were answered
// with their rcode, and the first socket error that stopped a worker.
func (l *loadRun) answered(since time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.results {
		if r.Outcome == loadOK && !r.Sent.Before(since) {
			n++
		}
	}
	return n, l.err
}

// waitAnswered waits until n queries sent at or after since were answered
// with their rcode: a stretch of steady state, measured in queries.
func (l *loadRun) waitAnswered(t testing.TB, since time.Time, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d answered load queries", n), func() error {
		got, err := l.answered(since)
		if err != nil {
			return fmt.Errorf("load stopped: %w", err)
		}
		if got < n {
			return fmt.Errorf("%d answered", got)
		}
		return nil
	})
}

// exchangeOnce sends q on the connected socket c and waits for its reply.
// Only a failure of the socket itself is an error; a missing or wrong reply
// is an outcome.
func exchangeOnce(c net.Conn, q loadName, timeout time.Duration) (loadResult, error) {
	m := new(dns.Msg)
	m.SetQuestion(q.Name, q.Type)
	pkt, err := m.Pack()
	if err != nil {
		return loadResult{}, fmt.Errorf("packing %s: %w", q.Name, err)
	}
	r := loadResult{Sent: time.Now()}
	if _, err := c.Write(pkt); err != nil {
		if isRefused(err) { // ICMP port unreachable from an earlier query
			r.Outcome, r.Detail = loadRefused, err.Error()
			return r, nil
		}
		return r, fmt.Errorf("sending %s: %w", q.Name, err)
	}
	if err := c.SetReadDeadline(r.Sent.Add(timeout)); err != nil {
		return r, fmt.Errorf("setting deadline: %w", err)
	}
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			r.Outcome, r.Detail = loadLost, err.Error()
			return r, nil
		case isRefused(err):
			r.Outcome, r.Detail = loadRefused, err.Error()
			return r, nil
		case err != nil:
			return r, fmt.Errorf("reading reply to %s: %w", q.Name, err)
		}
		var reply dns.Msg
		if reply.Unpack(buf[:n]) != nil || reply.Id != m.Id {
			continue // a late reply to an earlier query of this socket
		}
		r.RTT = time.Since(r.Sent)
		r.Outcome = judgeReply(&reply, q)
		if r.Outcome != loadOK {
			r.Detail = fmt.Sprintf("%s %s: %s", q.Name, dns.TypeToString[q.Type], dns.RcodeToString[reply.Rcode])
		}
		return r, nil
	}
}

// errLoadStopped ends a worker quietly: the run was stopped mid-query.
var errLoadStopped = errors.New("load stopped")

// exchangeTCP sends q over a new TCP connection from ns and reads its reply.
// A refused connection or one closed before the reply is an outcome.
func exchangeTCP(ctx context.Context, ns *netNS, server string, q loadName, timeout time.Duration) (loadResult, error) {
	m := new(dns.Msg)
	m.SetQuestion(q.Name, q.Type)
	r := loadResult{Sent: time.Now()}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := ns.dial(dctx, "tcp", server)
	if err != nil {
		if ctx.Err() != nil {
			return r, errLoadStopped
		}
		r.Outcome, r.Detail = loadRefused, err.Error()
		return r, nil
	}
	defer nc.Close()
	c := &dns.Conn{Conn: nc}
	_ = c.SetDeadline(r.Sent.Add(timeout))
	if err := c.WriteMsg(m); err != nil {
		r.Outcome, r.Detail = loadLost, "writing: "+err.Error()
		return r, nil
	}
	reply, err := c.ReadMsg()
	if err != nil {
		r.Outcome, r.Detail = loadLost, "reading: "+err.Error()
		return r, nil
	}
	r.RTT = time.Since(r.Sent)
	r.Outcome = judgeReply(reply, q)
	if r.Outcome != loadOK {
		r.Detail = fmt.Sprintf("%s %s over tcp: %s", q.Name, dns.TypeToString[q.Type], dns.RcodeToString[reply.Rcode])
	}
	return r, nil
}

func judgeReply(reply *dns.Msg, q loadName) string {
	switch {
	case len(reply.Question) != 1 || !strings.EqualFold(reply.Question[0].Name, q.Name) || reply.Question[0].Qtype != q.Type:
		return loadWrong
	case reply.Rcode == q.Rcode:
		return loadOK
	case reply.Rcode == dns.RcodeServerFailure:
		return loadServFail
	}
	return loadWrong
}

// isRefused reports an ICMP port unreachable, which a connected UDP socket
// returns on a later call: nothing listened when a query arrived.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// window is a span of time of a load run, e.g. one handover.
type window struct{ From, To time.Time }

func (w window) holds(t time.Time) bool { return !t.Before(w.From) && !t.After(w.To) }

// loadStats summarises some results of a run.
type loadStats struct {
	N        int
	Outcomes map[string]int
	P50, P99 time.Duration // over answered queries
	Details  []string      // the first few non-OK outcomes
}

// summarise splits results into those sent inside any of ws and the rest.
func summarise(results []loadResult, ws []window) (inside, outside loadStats) {
	var in, out []loadResult
	for _, r := range results {
		if slices.ContainsFunc(ws, func(w window) bool { return w.holds(r.Sent) }) {
			in = append(in, r)
		} else {
			out = append(out, r)
		}
	}
	return stats(in), stats(out)
}

func stats(rs []loadResult) loadStats {
	s := loadStats{N: len(rs), Outcomes: map[string]int{}}
	var rtts []time.Duration
	for _, r := range rs {
		s.Outcomes[r.Outcome]++
		if r.Outcome != loadLost && r.Outcome != loadRefused {
			rtts = append(rtts, r.RTT)
		}
		if r.Outcome != loadOK && len(s.Details) < 5 {
			s.Details = append(s.Details, r.Detail)
		}
	}
	slices.Sort(rtts)
	s.P50, s.P99 = quantile(rtts, 0.50), quantile(rtts, 0.99)
	return s
}

// quantile of sorted ds (nearest rank); 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func (s loadStats) String() string {
	return fmt.Sprintf("%d queries (ok %d, lost %d, refused by ICMP %d, servfail %d, wrong %d), p50 %v, p99 %v",
		s.N, s.Outcomes[loadOK], s.Outcomes[loadLost], s.Outcomes[loadRefused], s.Outcomes[loadServFail], s.Outcomes[loadWrong],
		s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond))
}

// firstAnswer asks q from ns every step (a new query when the last got no
// reply within step) until it gets q's rcode, and returns when; it fails t
// after limit.
func firstAnswer(t testing.TB, ns *netNS, server string, q loadName, step, limit time.Duration) time.Time {
	t.Helper()
	c, err := ns.dial(t.Context(), "udp", server)
	if err != nil {
		t.Fatalf("probe socket in %s: %v", ns.Name, err)
	}
	defer c.Close()
	for end := time.Now().Add(limit); time.Now().Before(end); {
		r, err := exchangeOnce(c, q, step)
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		if r.Outcome == loadOK {
			return r.Sent.Add(r.RTT)
		}
		if r.Outcome == loadRefused {
			time.Sleep(step)
		}
	}
	t.Fatalf("probe %s: no answer within %v", q.Name, limit)
	return time.Time{}
}
