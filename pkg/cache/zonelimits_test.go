package cache

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// TestZoneLimits checks that the longest zone's caps apply to positive
// and negative replies, names outside every zone keep the cache-wide caps,
// and SetZoneLimits takes effect for the next store.
func TestZoneLimits(t *testing.T) {
	cfg := Config{MaxTTL: time.Hour, MaxNegativeTTL: time.Hour, ZoneLimits: map[string]ZoneLimit{
		"corp.example":      {MaxTTL: 30 * time.Second, MaxNegativeTTL: 5 * time.Second},
		"lab.corp.example.": {MaxTTL: 300 * time.Second},
		"Other.Example":     {MaxNegativeTTL: 10 * time.Second},
	}}
	up := &fakeUpstream{reply: answerA(600)}
	c := newTestCache(t, cfg, up, newClock())
	tests := []struct {
		name string
		neg  bool
		want uint32
	}{
		{"db.corp.example.", false, 30},
		{"DB.Corp.Example.", false, 30},
		{"corp.example.", false, 30},
		{"x.lab.corp.example.", false, 300},
		{"notcorp.example.", false, 600},
		{"www.other.example.", false, 600},
		{"nx.corp.example.", true, 5},
		{"nx.lab.corp.example.", true, 900}, // the longest zone wins whole: its zero cap is the cache-wide one
		{"nx.other.example.", true, 10},
		{"nx.elsewhere.", true, 900},
	}
	for _, tt := range tests {
		up.set(answerA(600))
		if tt.neg {
			up.set(func(req *dns.Msg) (*dns.Msg, error) { return replyNeg(req, dns.RcodeNameError, 900, 900), nil })
		}
		qs := newQuestion(t, tt.name, dns.TypeA)
		got := ttls(served(t, resolve(t, c, qs).Packed, qs, wire.TTLMode{}))
		if len(got) == 0 || got[0] != tt.want {
			t.Errorf("%s: got TTLs %v, want %d", tt.name, got, tt.want)
		}
	}
	if err := c.SetZoneLimits(map[string]ZoneLimit{"elsewhere.": {MaxTTL: 7 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	up.set(answerA(600))
	for name, want := range map[string]uint32{"a.elsewhere.": 7, "b.corp.example.": 600} {
		qs := newQuestion(t, name, dns.TypeA)
		if got := ttls(served(t, resolve(t, c, qs).Packed, qs, wire.TTLMode{})); got[0] != want {
			t.Errorf("after SetZoneLimits, %s: got %v, want %d", name, got, want)
		}
	}
	if err := c.SetZoneLimits(map[string]ZoneLimit{"bad..name": {}}); err == nil {
		t.Error("bad zone: got no error")
	}
	if _, err := New(Config{ZoneLimits: map[string]ZoneLimit{"x.": {MaxTTL: -time.Second}}}, up, nil, nil); err == nil {
		t.Error("negative zone cap: got no error from New")
	}
}
