package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// latencyConfig is an open-loop, fixed-rate UDP load: queries are sent on
// schedule whatever the replies do, so a slow server shows up as latency
// (and losses), not as a lower send rate.
type latencyConfig struct {
	Server   string        // host:port
	Rate     int           // queries per second, 1 to 200,000
	Duration time.Duration // how long to send; at most 10 minutes
	Timeout  time.Duration // a reply later than this counts as lost; zero means 1s
	Sockets  int           // UDP sockets, queries spread round robin; zero means 8
	// KernelRx times each reply at its arrival in the client's socket (the
	// kernel's SO_TIMESTAMPNS) instead of when the client's goroutine reads
	// it: the client sends a burst every millisecond on the one CPU it
	// shares with its receivers, and a reply waiting for the burst to end
	// is the client's latency, not the server's.
	KernelRx bool
}

// Validate fills in defaults and checks the bounds.
func (c *latencyConfig) Validate() error {
	if c.Timeout == 0 {
		c.Timeout = time.Second
	}
	if c.Sockets == 0 {
		c.Sockets = 8
	}
	switch {
	case c.Server == "":
		return errors.New("latency: no server")
	case c.Rate < 1 || c.Rate > 200000:
		return fmt.Errorf("latency: rate %d: want 1 to 200000 per second", c.Rate)
	case c.Duration <= 0 || c.Duration > 10*time.Minute:
		return fmt.Errorf("latency: duration %v: want up to 10m", c.Duration)
	case c.Sockets < 1 || c.Sockets > 64:
		return fmt.Errorf("latency: %d sockets: want 1 to 64", c.Sockets)
	case c.Timeout < 0 || c.Timeout > 5*time.Second:
		return fmt.Errorf("latency: timeout %v: want up to 5s", c.Timeout)
	}
	// IDs of one socket must not wrap while a query can still be answered.
	if perSock := float64(c.Rate) / float64(c.Sockets); c.Timeout.Seconds()*perSock >= 65536/2 {
		return fmt.Errorf("latency: %d qps over %d sockets reuses IDs within the %v timeout: add sockets", c.Rate, c.Sockets, c.Timeout)
	}
	return nil
}

// latencyResult holds what one run measured. Percentiles are over
// answered queries; lost ones are counted apart (a loaded machine drops
// datagrams at socket buffers, and a percentile that ranks them would hide
// every latency behind "lost").
type latencyResult struct {
	Sent, Answered uint64
	KernelRx       bool   // latencies end at each reply's arrival in the socket
	Unstamped      uint64 // with KernelRx, replies timed at their read: the kernel gave no time
	Rcodes         map[int]uint64
	Latencies      []time.Duration // of answered queries, sorted
}

// percentile returns the p-th percentile (0 < p <= 100) of the answered
// queries' latencies by nearest rank; ok is false when none was answered.
func (r *latencyResult) percentile(p float64) (d time.Duration, ok bool) {
	n := len(r.Latencies)
	if n == 0 {
		return 0, false
	}
	idx := int(math.Ceil(float64(n)*p/100)) - 1
	idx = min(max(idx, 0), n-1)
	return r.Latencies[idx], true
}

// readQueries parses dnsperf input ("name TYPE" per line, # comments) into
// packed queries with ID 0 and RD set.
func readQueries(r io.Reader, limit int) ([][]byte, error) {
	var out [][]byte
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan() && len(out) < limit; line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		qtype := dns.TypeA
		if len(f) > 1 {
			t, ok := dns.StringToType[strings.ToUpper(f[1])]
			if !ok {
				return nil, fmt.Errorf("line %d: unknown type %q", line, f[1])
			}
			qtype = t
		}
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(f[0]), qtype)
		m.Id = 0
		b, err := m.Pack()
		if err != nil {
			return nil, fmt.Errorf("line %d: packing %q: %w", line, f[0], err)
		}
		out = append(out, b)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading queries: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("no queries in input")
	}
	return out, nil
}

func readQueryFile(path string, limit int) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening queries: %w", err)
	}
	defer f.Close()
	return readQueries(f, limit)
}

// sock is one UDP socket with the send time of each outstanding ID.
type sock struct {
	conn *net.UDPConn
	sent [65536]atomic.Int64 // unix nanos of the outstanding query with that ID; 0 = none
	mu   sync.Mutex          // guards lats and rcodes
	lats []time.Duration
	rc   map[int]uint64

	unstamped atomic.Uint64 // replies the kernel gave no arrival time (KernelRx)
}

// runLatency sends queries (cycling) at cfg.Rate for cfg.Duration, waits
// cfg.Timeout for the last replies and returns the measurements.
func runLatency(ctx context.Context, cfg latencyConfig, queries [][]byte) (*latencyResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	raddr, err := net.ResolveUDPAddr("udp", cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", cfg.Server, err)
	}
	total := int(float64(cfg.Rate) * cfg.Duration.Seconds())
	socks := make([]*sock, cfg.Sockets)
	for i := range socks {
		c, err := net.DialUDP("udp", nil, raddr)
		if err != nil {
			for _, s := range socks[:i] {
				_ = s.conn.Close()
			}
			return nil, fmt.Errorf("dialing %s: %w", cfg.Server, err)
		}
		socks[i] = &sock{conn: c, lats: make([]time.Duration, 0, total/cfg.Sockets+1), rc: map[int]uint64{}}
		if cfg.KernelRx {
			if err := enableRxTime(c); err != nil {
				for _, s := range socks[:i+1] {
					_ = s.conn.Close()
				}
				return nil, err
			}
		}
	}
	var wg sync.WaitGroup
	for _, s := range socks {
		wg.Add(1)
		go func() { defer wg.Done(); s.receive(cfg.Timeout, cfg.KernelRx) }()
	}
	sent := send(ctx, cfg, queries, socks, total)
	timer := time.NewTimer(cfg.Timeout)
	select { // grace for the last replies
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
	}
	for _, s := range socks {
		_ = s.conn.Close() // unblocks receive
	}
	wg.Wait()
	res := &latencyResult{Sent: sent, Rcodes: map[int]uint64{}, KernelRx: cfg.KernelRx}
	for _, s := range socks {
		res.Latencies = append(res.Latencies, s.lats...)
		res.Unstamped += s.unstamped.Load()
		for rc, n := range s.rc {
			res.Rcodes[rc] += n
		}
	}
	res.Answered = uint64(len(res.Latencies))
	slices.Sort(res.Latencies)
	return res, nil
}

// send paces total queries over the run: query k is due at start+k/rate.
// It sleeps about a millisecond between batches and sends whatever fell
// due meanwhile, so the schedule holds even when a sleep overruns; each
// query's latency is timed from its own send.
func send(ctx context.Context, cfg latencyConfig, queries [][]byte, socks []*sock, total int) uint64 {
	buf := make([]byte, 0, 512)
	interval := time.Second / time.Duration(cfg.Rate)
	start := time.Now()
	var k int
	for k < total && ctx.Err() == nil {
		now := time.Now()
		due := int(now.Sub(start)/interval) + 1
		for ; k < due && k < total; k++ {
			s := socks[k%len(socks)]
			id := uint16(k / len(socks))
			buf = append(buf[:0], queries[k%len(queries)]...)
			buf[0], buf[1] = byte(id>>8), byte(id)
			s.sent[id].Store(time.Now().UnixNano())
			if _, err := s.conn.Write(buf); err != nil {
				s.sent[id].Store(0) // counted as lost: a send error is the harness's, but it is visible
			}
		}
		time.Sleep(time.Millisecond)
	}
	return uint64(k)
}

// receive records the latency of every reply matching an outstanding ID
// until the socket is closed, to the reply's arrival in the socket when
// kernelRx (else to its read).
func (s *sock) receive(timeout time.Duration, kernelRx bool) {
	buf := make([]byte, 65535)
	oob := make([]byte, 128)
	for {
		n, oobn, _, _, err := s.conn.ReadMsgUDP(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ICMP port unreachable before the server is up
		}
		now := time.Now().UnixNano()
		if kernelRx {
			if t, ok := rxTime(oob[:oobn]); ok {
				now = t
			} else {
				s.unstamped.Add(1) // timed at its read
			}
		}
		if n < 12 {
			continue
		}
		id := uint16(buf[0])<<8 | uint16(buf[1])
		t0 := s.sent[id].Swap(0)
		if t0 == 0 {
			continue // duplicate or unknown reply
		}
		lat := time.Duration(now - t0)
		if lat > timeout {
			continue
		}
		s.mu.Lock()
		s.lats = append(s.lats, lat)
		s.rc[int(buf[3]&0x0f)]++
		s.mu.Unlock()
	}
}

// format prints the result as key=value pairs for bench/run.sh.
func (r *latencyResult) format() string {
	var b strings.Builder
	lostPct := 0.0
	if r.Sent > 0 {
		lostPct = float64(r.Sent-r.Answered) / float64(r.Sent) * 100
	}
	fmt.Fprintf(&b, "sent=%d answered=%d lost=%d lost_pct=%.2f", r.Sent, r.Answered, r.Sent-r.Answered, lostPct)
	if r.KernelRx {
		fmt.Fprintf(&b, " rx_time=kernel unstamped=%d", r.Unstamped)
	}
	for _, p := range []struct {
		name string
		p    float64
	}{{"p50", 50}, {"p90", 90}, {"p99", 99}, {"p999", 99.9}} {
		if d, ok := r.percentile(p.p); ok {
			fmt.Fprintf(&b, " %s_us=%.1f", p.name, float64(d)/float64(time.Microsecond))
		} else {
			fmt.Fprintf(&b, " %s_us=none", p.name)
		}
	}
	rcs := make([]int, 0, len(r.Rcodes))
	for rc := range r.Rcodes {
		rcs = append(rcs, rc)
	}
	slices.Sort(rcs)
	for _, rc := range rcs {
		fmt.Fprintf(&b, " rcode_%s=%d", dns.RcodeToString[rc], r.Rcodes[rc])
	}
	return b.String()
}
