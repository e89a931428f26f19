package tap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	dnstap "github.com/dnstap/golang-dnstap"
	framestream "github.com/farsightsec/golang-framestream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// Config configures a Tap. Zero values select the documented defaults.
type Config struct {
	Addr          string // unix:///PATH or tcp://HOST:PORT; required
	Buffer        int    // messages queued before dropping; default 10000
	RetryInterval time.Duration
	WriteTimeout  time.Duration
	Identity      string // the dnstap identity: the node's name
	Version       string
}

// ParseAddr splits a --dnstap value into a network and an address.
func ParseAddr(s string) (network, addr string, err error) {
	switch {
	case strings.HasPrefix(s, "unix://"):
		addr = strings.TrimPrefix(s, "unix://")
		if !strings.HasPrefix(addr, "/") {
			return "", "", fmt.Errorf("dnstap address %q: want unix:///ABSOLUTE/PATH", s)
		}
		return "unix", addr, nil
	case strings.HasPrefix(s, "tcp://"):
		addr = strings.TrimPrefix(s, "tcp://")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", fmt.Errorf("dnstap address %q: want tcp://HOST:PORT", s)
		}
		return "tcp", addr, nil
	}
	return "", "", fmt.Errorf("dnstap address %q: want unix:///PATH or tcp://HOST:PORT", s)
}

// Loopback reports whether the HOST:PORT addr names a loopback address
// ("localhost" or a loopback IP): dnstap sent there stays on the node.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Tap queues and sends dnstap messages. Its methods never block.
type Tap struct {
	cfg              Config
	network, addr    string
	log              *slog.Logger
	ch               chan []byte // encoded Dnstap frames
	identity, verStr []byte
	sent, dropped    prometheus.Counter
	lost             prometheus.Counter

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New checks cfg, registers the metrics and starts the connection's
// goroutine; Close stops it. reg may be nil: the metrics are then kept but
// registered nowhere. log may be nil: logs are then discarded.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Tap, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	network, addr, err := ParseAddr(cfg.Addr)
	if err != nil {
		return nil, err
	}
	if cfg.Buffer < 0 || cfg.RetryInterval < 0 || cfg.WriteTimeout < 0 {
		return nil, errors.New("dnstap: buffer, retry interval and write timeout must not be negative")
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = 10000
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = 2 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if network == "tcp" && !Loopback(addr) {
		log.Warn("dnstap over tcp:// is clear text: every pod's queries and answers cross the network unencrypted; "+
			"send to a collector on this node (a loopback address or unix://) and forward from there over an encrypted channel",
			"dnstap", cfg.Addr)
	}
	msgs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodecache_dnstap_messages_total",
		Help: "dnstap messages by result: sent, dropped (the queue was full), lost (written to a connection that failed)."},
		[]string{"result"})
	if err := reg.Register(msgs); err != nil {
		return nil, fmt.Errorf("registering dnstap metrics: %w", err)
	}
	t := &Tap{cfg: cfg, network: network, addr: addr, log: log, ch: make(chan []byte, cfg.Buffer),
		identity: []byte(cfg.Identity), verStr: []byte(cfg.Version),
		sent: msgs.WithLabelValues("sent"), dropped: msgs.WithLabelValues("dropped"), lost: msgs.WithLabelValues("lost")}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.run(ctx)
	}()
	return t, nil
}

// Close stops the connection's goroutine and waits for it; queued
// messages not yet written are dropped. Safe to call more than once.
func (t *Tap) Close() error {
	t.once.Do(func() {
		t.cancel()
		t.wg.Wait()
	})
	return nil
}

// run owns the connection: dial, write what is queued, redial on failure.
func (t *Tap) run(ctx context.Context) {
	d := net.Dialer{Timeout: t.cfg.WriteTimeout}
	for {
		conn, err := d.DialContext(ctx, t.network, t.addr)
		if err == nil {
			err = t.serve(ctx, conn)
			_ = conn.Close()
		}
		if ctx.Err() != nil {
			return
		}
		t.log.Warn("dnstap output unavailable; messages queue, then drop", logkey.Addr, t.cfg.Addr, logkey.Err, err,
			"retry", t.cfg.RetryInterval)
		select {
		case <-ctx.Done():
			return
		case <-time.After(t.cfg.RetryInterval):
		}
	}
}

// serve runs one Frame Streams session on conn until it fails or ctx ends.
func (t *Tap) serve(ctx context.Context, conn net.Conn) error {
	w, err := framestream.NewWriter(conn, &framestream.WriterOptions{
		ContentTypes: [][]byte{dnstap.FSContentType}, Bidirectional: true, Timeout: t.cfg.WriteTimeout})
	if err != nil {
		return fmt.Errorf("starting a frame stream: %w", err)
	}
	var unflushed int
	flush := func() error {
		_ = conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		if err := w.Flush(); err != nil {
			t.lost.Add(float64(unflushed))
			return fmt.Errorf("writing dnstap frames: %w", err)
		}
		t.sent.Add(float64(unflushed))
		unflushed = 0
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			_ = flush()
			_ = w.Close()
			return ctx.Err()
		case b := <-t.ch:
			_ = conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
			unflushed++
			if _, err := w.WriteFrame(b); err != nil {
				t.lost.Add(float64(unflushed))
				return fmt.Errorf("writing a dnstap frame: %w", err)
			}
			if len(t.ch) == 0 || unflushed >= 256 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
}

// TapClient queues CLIENT_QUERY and CLIENT_RESPONSE for one answered
// query from client to local (over TCP or UDP), query at start, reply at
// end. The slices are copied before it returns. (server.Tap)
func (t *Tap) TapClient(client, local netip.AddrPort, tcp bool, query, reply []byte, start, end time.Time) {
	t.queue(dnstap.Message_CLIENT_QUERY, client, local, tcp, query, nil, start, time.Time{})
	if reply != nil {
		t.queue(dnstap.Message_CLIENT_RESPONSE, client, local, tcp, query, reply, start, end)
	}
}

// TapForwarder queues FORWARDER_QUERY for one attempt at an upstream, and
// FORWARDER_RESPONSE when reply is not nil. (upstream.Tap)
func (t *Tap) TapForwarder(upstream netip.AddrPort, tcp bool, query, reply []byte, sent, received time.Time) {
	t.queue(dnstap.Message_FORWARDER_QUERY, netip.AddrPort{}, upstream, tcp, query, nil, sent, time.Time{})
	if reply != nil {
		t.queue(dnstap.Message_FORWARDER_RESPONSE, netip.AddrPort{}, upstream, tcp, query, reply, sent, received)
	}
}

// queue encodes one message unless the queue is full.
func (t *Tap) queue(typ dnstap.Message_Type, qaddr, raddr netip.AddrPort, tcp bool, query, reply []byte, qt, rt time.Time) {
	if len(t.ch) == cap(t.ch) {
		t.dropped.Inc()
		return
	}
	m := &dnstap.Message{Type: &typ}
	fam, sp := dnstap.SocketFamily_INET, dnstap.SocketProtocol_UDP
	if addr := raddr.Addr(); addr.Is6() && !addr.Is4In6() {
		fam = dnstap.SocketFamily_INET6
	}
	if tcp {
		sp = dnstap.SocketProtocol_TCP
	}
	m.SocketFamily, m.SocketProtocol = &fam, &sp
	if qaddr.IsValid() {
		m.QueryAddress = qaddr.Addr().Unmap().AsSlice()
		m.QueryPort = proto.Uint32(uint32(qaddr.Port()))
	}
	if raddr.IsValid() {
		m.ResponseAddress = raddr.Addr().Unmap().AsSlice()
		m.ResponsePort = proto.Uint32(uint32(raddr.Port()))
	}
	if !qt.IsZero() {
		m.QueryTimeSec, m.QueryTimeNsec = proto.Uint64(uint64(qt.Unix())), proto.Uint32(uint32(qt.Nanosecond()))
	}
	if reply != nil {
		m.ResponseMessage = reply
		m.ResponseTimeSec, m.ResponseTimeNsec = proto.Uint64(uint64(rt.Unix())), proto.Uint32(uint32(rt.Nanosecond()))
	} else {
		m.QueryMessage = query
	}
	dt := dnstap.Dnstap_MESSAGE
	b, err := proto.Marshal(&dnstap.Dnstap{Type: &dt, Identity: t.identity, Version: t.verStr, Message: m})
	if err != nil {
		t.dropped.Inc()
		return
	}
	select {
	case t.ch <- b:
	default:
		t.dropped.Inc()
	}
}
