package upstream

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzParseReply feeds arbitrary datagrams to the reply check: it must not
// panic, and whatever it accepts must carry the ID and question asked.
func FuzzParseReply(f *testing.F) {
	r := query("www.example.", dns.TypeA)
	r.Id = 0x1234
	good, err := replyA(r, "192.0.2.1").Pack()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:20])
	f.Add([]byte{0x12, 0x34, 0x82, 0, 0, 1})
	q := &r.Question[0]
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, v := parseReply(data, 0x1234, q)
		if v != replyOK && !(v == replyTruncated && resp != nil) {
			return
		}
		if resp.Id != 0x1234 || !resp.Response || !sameQuestion(resp, q) {
			t.Errorf("accepted a reply for another query: %v", resp)
		}
	})
}

// FuzzParseServers checks that every accepted server is usable.
func FuzzParseServers(f *testing.F) {
	for _, s := range []string{"1.1.1.1", "[::1]:53", "::1,8.8.8.8:5353", "1.1.1.1:0", ",", "[::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if strings.ContainsRune(spec, '/') {
			return // a path; not read during fuzzing
		}
		servers, err := ParseServers(spec)
		if err != nil {
			return
		}
		for _, s := range servers {
			if !s.IsValid() || s.Port() == 0 || s.Addr().IsUnspecified() {
				t.Errorf("ParseServers(%q) accepted %v", spec, s)
			}
		}
	})
}
