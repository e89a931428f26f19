package tap

import (
	"bytes"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dnstap "github.com/dnstap/golang-dnstap"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
)

func TestParseAddr(t *testing.T) {
	for _, tt := range []struct{ in, network, addr string }{
		{"unix:///run/dnstap.sock", "unix", "/run/dnstap.sock"},
		{"tcp://127.0.0.1:6000", "tcp", "127.0.0.1:6000"},
		{"tcp://[::1]:6000", "tcp", "[::1]:6000"},
		{"unix://relative.sock", "", ""},
		{"tcp://127.0.0.1", "", ""},
		{"/run/dnstap.sock", "", ""},
	} {
		n, a, err := ParseAddr(tt.in)
		if n != tt.network || a != tt.addr || (err != nil) != (tt.network == "") {
			t.Errorf("ParseAddr(%q): got %q %q %v, want %q %q", tt.in, n, a, err, tt.network, tt.addr)
		}
	}
}

// TestTapToFrameStreamReader sends client and forwarder messages to a real
// Frame Streams reader (the dnstap library's own) on a unix socket.
func TestTapToFrameStreamReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dnstap.sock")
	in, err := dnstap.NewFrameStreamSockInputFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan []byte, 16)
	go in.ReadInto(frames)

	tp, err := New(Config{Addr: "unix://" + path, Identity: "node-1", Version: "test"}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close() })
	client := netip.MustParseAddrPort("10.0.0.7:40000")
	local := netip.MustParseAddrPort("169.254.20.10:53")
	up := netip.MustParseAddrPort("10.96.0.10:53")
	start := time.Unix(1700000000, 5)
	tp.TapClient(client, local, false, []byte("query"), []byte("reply"), start, start.Add(time.Millisecond))
	tp.TapForwarder(up, true, []byte("fwd-query"), nil, start, time.Time{})

	want := []struct {
		typ          dnstap.Message_Type
		msg          string
		qaddr, raddr netip.AddrPort
		sp           dnstap.SocketProtocol
	}{
		{dnstap.Message_CLIENT_QUERY, "query", client, local, dnstap.SocketProtocol_UDP},
		{dnstap.Message_CLIENT_RESPONSE, "reply", client, local, dnstap.SocketProtocol_UDP},
		{dnstap.Message_FORWARDER_QUERY, "fwd-query", netip.AddrPort{}, up, dnstap.SocketProtocol_TCP},
	}
	for i, w := range want {
		var f []byte
		select {
		case f = <-frames:
		case <-time.After(10 * time.Second): // guards against a hang only
			t.Fatalf("frame %d: none arrived", i)
		}
		var d dnstap.Dnstap
		if err := proto.Unmarshal(f, &d); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		m := d.GetMessage()
		got := m.GetQueryMessage()
		if m.GetType() == dnstap.Message_CLIENT_RESPONSE {
			got = m.GetResponseMessage()
		}
		if m.GetType() != w.typ || string(got) != w.msg || m.GetSocketProtocol() != w.sp || string(d.GetIdentity()) != "node-1" {
			t.Errorf("frame %d: got %v %q %v identity %q, want %v %q %v node-1", i, m.GetType(), got, m.GetSocketProtocol(), d.GetIdentity(), w.typ, w.msg, w.sp)
		}
		if w.qaddr.IsValid() && (!bytes.Equal(m.GetQueryAddress(), w.qaddr.Addr().AsSlice()) || m.GetQueryPort() != uint32(w.qaddr.Port())) {
			t.Errorf("frame %d: query address %v:%d, want %v", i, m.GetQueryAddress(), m.GetQueryPort(), w.qaddr)
		}
		if !bytes.Equal(m.GetResponseAddress(), w.raddr.Addr().AsSlice()) || m.GetResponsePort() != uint32(w.raddr.Port()) {
			t.Errorf("frame %d: response address %v:%d, want %v", i, m.GetResponseAddress(), m.GetResponsePort(), w.raddr)
		}
		if i == 0 && (m.GetQueryTimeSec() != 1700000000 || m.GetQueryTimeNsec() != 5) {
			t.Errorf("frame 0: query time %d.%d, want 1700000000.5", m.GetQueryTimeSec(), m.GetQueryTimeNsec())
		}
	}
}

// TestTapDropsWhenNobodyReads fills the queue of a tap whose reader never
// comes: the surplus is dropped and counted, and nothing blocks.
func TestTapDropsWhenNobodyReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nobody.sock")
	reg := prometheus.NewRegistry()
	tp, err := New(Config{Addr: "unix://" + path, Buffer: 8, RetryInterval: time.Hour}, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		tp.TapClient(netip.MustParseAddrPort("10.0.0.7:1"), netip.MustParseAddrPort("10.0.0.1:53"), false, []byte("q"), []byte("r"), time.Now(), time.Now())
	}
	if got := testutil.ToFloat64(tp.dropped); got != 12 {
		t.Errorf("dropped: got %v, want 12 (20 messages, a queue of 8)", got)
	}
	if err := tp.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// TestClearTextWarning: dnstap over tcp:// to anything but loopback gets one
// Warn line at start saying the stream is clear text; loopback and unix://
// get none.
func TestClearTextWarning(t *testing.T) {
	for _, tc := range []struct {
		addr string
		warn bool
	}{
		{"tcp://127.0.0.1:1", false},
		{"tcp://[::1]:1", false},
		{"tcp://localhost:1", false},
		{"unix:///nonexistent/tap.sock", false},
		// Not loopback, yet a dial of it stays on this host (refused): the
		// test sends nothing off the node.
		{"tcp://0.0.0.0:1", true},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			var sb strings.Builder
			log := slog.New(slog.NewTextHandler(&sb, &slog.HandlerOptions{Level: slog.LevelWarn}))
			// A retry interval longer than the test: the tap dials once at most.
			tp, err := New(Config{Addr: tc.addr, RetryInterval: time.Hour}, nil, log)
			if err != nil {
				t.Fatal(err)
			}
			tp.Close()
			if got := strings.Contains(sb.String(), "clear text"); got != tc.warn {
				t.Errorf("got log %q, want a clear-text warning: %v", sb.String(), tc.warn)
			}
		})
	}
}
