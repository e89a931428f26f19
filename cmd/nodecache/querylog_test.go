package main

import (
	"bytes"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dnstap "github.com/dnstap/golang-dnstap"
	"github.com/miekg/dns"
	"google.golang.org/protobuf/proto"

	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/wire"
)

func TestQueryLogFiltersSamplesAndLimits(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c := queryLogConfig{Rate: 3, Sample: 2, clients: "10.0.0.0/24, fd00::1", suffixes: "example.org", rcodes: "NXDOMAIN"}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	ql, err := newQueryLog(&c, log)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	ql.now = func() time.Time { return at } // no token refills during the test
	nx := server.Result{Rcode: dns.RcodeNameError, Source: wire.SourceCache}
	in, out := netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("10.0.1.9")
	q := parsedQuery(t, "www.Example.org.")
	ql.Observe(in, q, server.Result{Source: wire.SourceCache}, time.Millisecond) // NOERROR: filtered
	ql.Observe(out, q, nx, time.Millisecond)                                     // other client: filtered
	ql.Observe(in, parsedQuery(t, "www.example.net."), nx, time.Millisecond)     // other suffix: filtered
	for range 20 {
		ql.Observe(in, q, nx, time.Millisecond) // 10 sampled, 3 within the rate (burst 3)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3 (20 matching, 1 in 2 sampled, burst 3):\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"msg=query", "client=10.0.0.9", "name=www.example.org.", "type=A", "rcode=NXDOMAIN", "source=cache"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line %q lacks %q", lines[0], want)
		}
	}
	if got := ql.skipped.Load(); got != 7 {
		t.Errorf("over the rate: got %d, want 7", got)
	}
	off, err := newQueryLog(&queryLogConfig{Sample: 1}, log)
	if off != nil || err != nil {
		t.Errorf("rate 0: got %v, %v; want no query log", off, err)
	}
	for _, bad := range []queryLogConfig{{Rate: -1, Sample: 1}, {Rate: 1, Sample: 0}, {Rate: 1, Sample: 1, clients: "nope"},
		{Rate: 1, Sample: 1, rcodes: "BOGUS"}, {Rate: 1, Sample: 1, suffixes: "a..b"}} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v: got no error, want one", bad)
		}
	}
}

// TestAgentDnstap runs an agent with --dnstap on a unix socket read by the
// dnstap library's Frame Streams reader, and checks a miss yields the
// client's query and reply and the upstream's query and reply.
func TestAgentDnstap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tap.sock")
	in, err := dnstap.NewFrameStreamSockInputFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan []byte, 64)
	go in.ReadInto(frames)
	up := startUpstream(t)
	port := freePort(t)
	cfg := testAgentConfig(t, up.addr, t.TempDir(), port, "--dnstap", "unix://"+path)
	startAgent(t, cfg)
	ask(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String(), "tap.example.org.", dns.TypeA)

	seen := map[dnstap.Message_Type]bool{}
	want := []dnstap.Message_Type{dnstap.Message_CLIENT_QUERY, dnstap.Message_CLIENT_RESPONSE,
		dnstap.Message_FORWARDER_QUERY, dnstap.Message_FORWARDER_RESPONSE}
	timeout := time.After(15 * time.Second) // guards against a hang only
	for len(seen) < len(want) {
		select {
		case f := <-frames:
			var d dnstap.Dnstap
			if err := proto.Unmarshal(f, &d); err != nil {
				t.Fatal(err)
			}
			m := d.GetMessage()
			raw := m.GetQueryMessage()
			if len(m.GetResponseMessage()) > 0 {
				raw = m.GetResponseMessage()
			}
			var msg dns.Msg
			if err := msg.Unpack(raw); err != nil || len(msg.Question) != 1 || !strings.EqualFold(msg.Question[0].Name, "tap.example.org.") { // upstream queries go out in 0x20 mixed case
				continue // the agent's own start-up checks
			}
			seen[m.GetType()] = true
		case <-timeout:
			t.Fatalf("got message types %v, want %v", seen, want)
		}
	}
}
