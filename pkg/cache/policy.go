package cache

import (
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// kind is the class of a cached reply, the label of inserts_total.
type kind uint8

const (
	kindPositive kind = iota
	kindNegative      // NXDOMAIN or NODATA (RFC 2308)
	kindServfail      // SERVFAIL (RFC 2308 7.1)
	numKinds
)

var kindNames = [numKinds]string{"positive", "negative", "servfail"}

func (k kind) String() string { return kindNames[k] }

// reason says why a reply is not cached, the label of uncacheable_total.
type reason uint8

const (
	reasonNone      reason = iota
	reasonTruncated        // TC set: the full answer is larger
	reasonQuestion         // the reply answers another question
	reasonNoSOA            // a negative reply without SOA has no negative TTL (RFC 2308 5)
	reasonRcode            // REFUSED, NOTIMP, FORMERR and the rest say nothing about the name
	reasonZeroTTL          // TTL 0 means "use once" (RFC 1035 3.2.1)
	reasonTooLarge         // larger than a shard's whole byte budget
	reasonBadReply         // the reply could not be packed
	reasonImport           // a predecessor's entry a fetch would not have stored as it claims (Import)
	numReasons
)

var reasonNames = [numReasons]string{"", "truncated", "question_mismatch", "no_soa", "rcode", "zero_ttl", "too_large", "bad_reply", "import_rejected"}

func (r reason) String() string { return reasonNames[r] }

// limits holds the TTL caps the policy applies.
type limits struct {
	maxTTL, maxNegativeTTL, servfailTTL time.Duration
}

// decide applies RFC 2308 to an upstream reply for key: whether to cache it,
// as what, and for how long (whole seconds, never zero when cached).
func decide(l limits, key *wire.Key, reply *dns.Msg) (time.Duration, kind, reason) {
	if reply.Truncated {
		return 0, 0, reasonTruncated
	}
	if !questionMatches(key, reply) {
		return 0, 0, reasonQuestion
	}
	facts := wire.Upstream{Rcode: reply.Rcode, Answers: len(reply.Answer)}
	if len(reply.Answer) > 0 {
		facts.AnswerMinTTL = minTTL(reply.Answer)
	}
	if soa := findSOA(reply.Ns); soa != nil {
		facts.SOA, facts.SOATTL, facts.SOAMinimum = true, soa.Hdr.Ttl, soa.Minttl
	}
	return judge(l, &facts)
}

// decideScanned is decide for a reply read by wire.ScanUpstream, which
// takes no truncated reply and no extended rcode.
func decideScanned(l limits, key *wire.Key, u *wire.Upstream) (time.Duration, kind, reason) {
	if !u.QuestionIs(key.Name, key.Type, key.Class) {
		return 0, 0, reasonQuestion
	}
	return judge(l, u)
}

// judge is decide's verdict on a reply to the right question, from its
// rcode, answer TTLs and SOA. A negative reply lives min(SOA TTL, SOA
// MINIMUM) of the authority section's first SOA, capped (RFC 2308 5).
func judge(l limits, u *wire.Upstream) (time.Duration, kind, reason) {
	switch u.Rcode {
	case dns.RcodeSuccess:
		if u.Answers > 0 {
			return capTTL(seconds(u.AnswerMinTTL), l.maxTTL, kindPositive)
		}
		// NODATA: negative, like NXDOMAIN.
	case dns.RcodeNameError:
	case dns.RcodeServerFailure:
		return capTTL(l.servfailTTL, l.servfailTTL, kindServfail)
	default:
		return 0, 0, reasonRcode
	}
	if !u.SOA {
		return 0, 0, reasonNoSOA
	}
	return capTTL(seconds(min(u.SOATTL, u.SOAMinimum)), l.maxNegativeTTL, kindNegative)
}

// capTTL caps ttl and truncates it to whole seconds, the unit TTLs are
// served in, so a served TTL never outlives the entry.
func capTTL(ttl, limit time.Duration, k kind) (time.Duration, kind, reason) {
	ttl = min(ttl, limit).Truncate(time.Second)
	if ttl <= 0 {
		return 0, 0, reasonZeroTTL
	}
	return ttl, k, reasonNone
}

func seconds(s uint32) time.Duration { return time.Duration(s) * time.Second }

// questionMatches reports whether reply carries exactly key's question
// (name compared case-insensitively).
func questionMatches(key *wire.Key, reply *dns.Msg) bool {
	if len(reply.Question) != 1 {
		return false
	}
	q := reply.Question[0]
	if q.Qtype != key.Type || q.Qclass != key.Class {
		return false
	}
	k, err := wire.NewKey(q.Name, q.Qtype, q.Qclass, key.DO, key.CD)
	return err == nil && k.Name == key.Name
}

// minTTL is the smallest TTL among rrs; rrs must not be empty.
func minTTL(rrs []dns.RR) uint32 {
	m := rrs[0].Header().Ttl
	for _, rr := range rrs[1:] {
		m = min(m, rr.Header().Ttl)
	}
	return m
}

func findSOA(rrs []dns.RR) *dns.SOA {
	for _, rr := range rrs {
		if soa, ok := rr.(*dns.SOA); ok {
			return soa
		}
	}
	return nil
}

// clampTTLs lowers m's record TTLs to at most ttl, in place, so that what a
// hit serves never outlives the entry (and a negative reply's SOA carries
// the negative TTL, RFC 2308 3). It returns m. The OPT record's TTL field
// holds EDNS flags and is left alone.
func clampTTLs(m *dns.Msg, ttl time.Duration) *dns.Msg {
	s := uint32(ttl / time.Second)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if h := rr.Header(); h.Rrtype != dns.TypeOPT {
				h.Ttl = min(h.Ttl, s)
			}
		}
	}
	return m
}
