package cache

import (
	"fmt"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// Judging a predecessor's entry (a handover record, a journal record)
// again, as if its reply had just been fetched: the record's word on kind,
// lifetime and flags is not trusted, and the reply is kept only when that
// verdict agrees, for no longer than either allows. A reply
// wire.ScanUpstream takes (nearly all: the forwarder's miss path stores
// the same shapes) is judged and stored from its bytes, as the miss path
// does; any other is unpacked with miekg/dns, which takes it or refuses
// it, as before. Either way what is stored is what a fetch would have
// stored (FuzzImportRecord, FuzzJournalRecord).

// header bits admit looks at (RFC 1035 4.1.1), in the reply's third and
// fourth bytes.
const (
	hdrOpcode = 0x78 // third byte
	hdrRD     = 0x01 // third byte
	hdrAD     = 0x20 // fourth byte
)

// admitScanned is admit for the reply msg (ours: AD is cleared in it)
// that wire.ScanUpstream read as u.
func (c *Cache) admitScanned(key *wire.Key, k kind, stored time.Time, ttl time.Duration, msg []byte, u *wire.Upstream, now time.Time) *entry {
	// The shape of a reply a fetch stores: a response (ScanUpstream checks
	// QR) to a standard query asked with recursion desired, not truncated
	// (nor does ScanUpstream take one).
	why := reasonImport
	var fttl time.Duration
	var fk kind
	if msg[2]&hdrOpcode == 0 && msg[2]&hdrRD != 0 {
		fttl, fk, why = decideScanned(c.limitsFor(key.Name), key, u)
	}
	stored, ttl, ok := c.admitted(why, k, fk, stored, ttl, fttl, now)
	if !ok {
		return nil
	}
	msg[3] &^= hdrAD // nothing here validated it
	return newEntry(key, packScannedEntry(msg, u, uint32(ttl/time.Second)), k, stored, ttl)
}

// admitUnpacked is admit for the reply m (ours), unpacked.
func (c *Cache) admitUnpacked(key *wire.Key, k kind, stored time.Time, ttl time.Duration, m *dns.Msg, now time.Time) (*entry, error) {
	if !questionMatches(key, m) {
		return nil, fmt.Errorf("reply does not answer %s", key.PresentationName())
	}
	fttl, fk, why := judgeImported(c.limitsFor(key.Name), key, m)
	stored, ttl, ok := c.admitted(why, k, fk, stored, ttl, fttl, now)
	if !ok {
		return nil, nil
	}
	m.AuthenticatedData = false // nothing here validated it
	// packEntry refuses what miekg/dns packs but cannot take back (an
	// empty-rdata SOA: the fuzzers found it): such a reply is not kept.
	p, err := packEntry(clampTTLs(m, ttl)) // m is ours
	if err != nil {
		c.met.uncacheable[reasonBadReply].Add(1)
		return nil, nil
	}
	return newEntry(key, p, k, stored, ttl), nil
}

// admitted is the verdict on a record that claims kind k and lifetime ttl
// from stored, given the policy's (why, fk, fttl): whether to keep it,
// from when and for how long. A rejection is counted.
func (c *Cache) admitted(why reason, k, fk kind, stored time.Time, ttl, fttl time.Duration, now time.Time) (time.Time, time.Duration, bool) {
	if why == reasonNone && fk != k {
		why = reasonImport
	}
	if why != reasonNone {
		c.met.uncacheable[why].Add(1)
		return stored, 0, false
	}
	if stored.After(now) { // a clock stepped back: trust no more than now
		stored = now
	}
	ttl = min(ttl, fttl).Truncate(time.Second)
	return stored, ttl, ttl > 0 && now.Before(stored.Add(ttl))
}
