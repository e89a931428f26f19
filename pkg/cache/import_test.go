package cache

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// dumpRecord encodes one handover record as Export writes it, with the
// kind and lifetime it claims and the reply m.
func dumpRecord(tb testing.TB, m *dns.Msg, k kind, stored time.Time, ttl time.Duration) []byte {
	tb.Helper()
	q := m.Question[0]
	key, err := wire.NewKey(q.Name, q.Qtype, q.Qclass, false, false)
	if err != nil {
		tb.Fatal(err)
	}
	msg, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	b := append([]byte{byte(len(key.Name))}, key.Name...)
	b = binary.BigEndian.AppendUint16(b, key.Type)
	b = binary.BigEndian.AppendUint16(b, key.Class)
	b = append(b, 0, byte(k))
	b = binary.BigEndian.AppendUint64(b, uint64(stored.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(ttl))
	return append(b, msg...)
}

// dumpOf frames records into a complete dump.
func dumpOf(recs ...[]byte) []byte {
	b := []byte(dumpMagic + string(rune(dumpVersion)))
	for _, r := range recs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(r)))
		b = append(b, r...)
	}
	return binary.BigEndian.AppendUint32(b, 0)
}

// TestImportJudgesAgain: a predecessor's record is stored only when a fetch
// of its reply would have been stored the same way; the good record after a
// rejected one is still imported.
func TestImportJudgesAgain(t *testing.T) {
	clk := newClock()
	req := func(name string) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		return m // RD set, as the cache asks
	}
	good := dumpRecord(t, replyA(req("good.example."), 300), kindPositive, t0, 300*time.Second)
	tests := []struct {
		name   string
		reply  *dns.Msg
		kind   kind
		ttl    time.Duration
		stored bool
	}{
		{"positive as claimed", replyA(req("a.example."), 300), kindPositive, 300 * time.Second, true},
		{"NXDOMAIN claimed positive", replyNeg(req("a.example."), dns.RcodeNameError, 60, 60), kindPositive, time.Minute, false},
		{"answer claimed negative", replyA(req("a.example."), 300), kindNegative, time.Minute, false},
		{"REFUSED claimed positive", replyNeg(req("a.example."), dns.RcodeRefused, 0, 0), kindPositive, time.Minute, false},
		{"asked without RD", func() *dns.Msg { m := replyA(req("a.example."), 300); m.RecursionDesired = false; return m }(), kindPositive, time.Minute, false},
		{"not a response", func() *dns.Msg { m := replyA(req("a.example."), 300); m.Response = false; return m }(), kindPositive, time.Minute, false},
		{"truncated", func() *dns.Msg { m := replyA(req("a.example."), 300); m.Truncated = true; return m }(), kindPositive, time.Minute, false},
		{"zero TTL", replyA(req("a.example."), 0), kindPositive, time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
			n, err := c.Import(bytes.NewReader(dumpOf(dumpRecord(t, tt.reply, tt.kind, t0, tt.ttl), good)), time.Time{})
			want := 1
			if tt.stored {
				want = 2
			}
			if err != nil || n != want {
				t.Errorf("Import: got %d, %v; want %d, nil", n, err, want)
			}
			qs := newQuestion(t, "a.example.", dns.TypeA)
			if _, _, hit := c.Lookup(&qs.q, clk.Now()); hit != tt.stored {
				t.Errorf("lookup after Import: got hit=%v, want %v", hit, tt.stored)
			}
		})
	}
}

// TestImportLifetimeFromTheReply: a record claiming a longer life than its
// reply's TTLs lives only as long as the reply allows.
func TestImportLifetimeFromTheReply(t *testing.T) {
	clk := newClock()
	m := new(dns.Msg)
	m.SetQuestion("short.example.", dns.TypeA)
	c := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
	if n, err := c.Import(bytes.NewReader(dumpOf(dumpRecord(t, replyA(m, 10), kindPositive, t0, time.Hour))), time.Time{}); n != 1 || err != nil {
		t.Fatalf("Import: got %d, %v; want 1, nil", n, err)
	}
	clk.Advance(11 * time.Second)
	qs := newQuestion(t, "short.example.", dns.TypeA)
	if _, _, hit := c.Lookup(&qs.q, clk.Now()); hit {
		t.Error("11s after the store of a 10s answer claimed to live 1h: got a hit, want a miss")
	}
}

// TestImportClearsAD: AD from a predecessor is not carried into the cache.
func TestImportClearsAD(t *testing.T) {
	clk := newClock()
	m := new(dns.Msg)
	m.SetQuestion("signed.example.", dns.TypeA)
	r := replyA(m, 300)
	r.AuthenticatedData = true
	c := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
	if n, err := c.Import(bytes.NewReader(dumpOf(dumpRecord(t, r, kindPositive, t0, 300*time.Second))), time.Time{}); n != 1 || err != nil {
		t.Fatalf("Import: got %d, %v; want 1, nil", n, err)
	}
	qs := newQuestion(t, "signed.example.", dns.TypeA)
	p, _, hit := c.Lookup(&qs.q, clk.Now())
	if !hit {
		t.Fatal("lookup after Import: got a miss, want a hit")
	}
	got, err := p.Msg()
	if err != nil {
		t.Fatal(err)
	}
	if got.AuthenticatedData {
		t.Error("stored reply: got AD set, want it cleared (nothing here validated it)")
	}
}

// FuzzImportRecord fuzzes the reply inside one well-framed record (the
// kind and lifetime it claims too), so that inputs reach the judging of
// Import rather than its framing checks: Import never panics, and what it
// stores is what a fetch of that reply would have stored, without AD.
func FuzzImportRecord(f *testing.F) {
	m := new(dns.Msg)
	m.SetQuestion("a.example.", dns.TypeA)
	for _, r := range []*dns.Msg{replyA(m, 300), replyNeg(m, dns.RcodeNameError, 60, 30), replyNeg(m, dns.RcodeServerFailure, 0, 0)} {
		b, _ := r.Pack()
		f.Add(uint8(kindPositive), uint32(300), b)
	}
	f.Fuzz(func(t *testing.T, k uint8, ttlSeconds uint32, reply []byte) {
		var r dns.Msg
		if r.Unpack(reply) != nil || len(r.Question) != 1 {
			return // not a reply whose question names a record: the framing tests cover those
		}
		q := r.Question[0]
		key, err := wire.NewKey(q.Name, q.Qtype, q.Qclass, false, false)
		if err != nil || k >= uint8(numKinds) {
			return
		}
		rec := append([]byte{byte(len(key.Name))}, key.Name...)
		rec = binary.BigEndian.AppendUint16(rec, key.Type)
		rec = binary.BigEndian.AppendUint16(rec, key.Class)
		rec = append(rec, 0, k)
		rec = binary.BigEndian.AppendUint64(rec, uint64(t0.UnixNano()))
		rec = binary.BigEndian.AppendUint64(rec, uint64(time.Duration(ttlSeconds)*time.Second))
		rec = append(rec, reply...)
		c := newTestCache(t, Config{MaxBytes: 1 << 20, Shards: 1}, &fakeUpstream{reply: failing}, newClock())
		n, err := c.Import(bytes.NewReader(dumpOf(rec)), time.Time{})
		if err != nil || n == 0 {
			return
		}
		var stored *entry
		for _, e := range c.shards[0].snapshot() {
			stored = e
		}
		got, err := stored.packed.Msg()
		if err != nil {
			t.Fatalf("stored reply does not unpack: %v", err)
		}
		if got.AuthenticatedData {
			t.Error("stored reply: AD set, want it cleared")
		}
		if _, fk, why := judgeImported(c.lim, &key, &r); why != reasonNone || fk != kind(k) {
			t.Errorf("stored a reply a fetch would not store as %v: verdict %v, %v", kind(k), fk, why)
		}
	})
}
