package kubezone

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// epList holds the ready endpoints of a slice compactly. As a []epModel an
// endpoint costs 40 bytes (a netip.Addr is 24: 16 of address and a zone
// pointer; a hostname string header 16, empty on most endpoints). Here an
// IPv4 address costs 4 bytes and the hostname header is kept only for
// slices where some endpoint has one: a slice of 100 IPv4 endpoints without
// hostnames costs 400 bytes instead of 4,000 (~3.6 MB saved on 100k
// endpoints), for 48 bytes more a slice in headers. Immutable once built,
// like the model that holds it; it reads back exactly the epModels it was
// built from, in order, and encodes to the same JSON as []epModel (the
// snapshot format).
type epList struct {
	v4    [][4]byte    // every address when all are IPv4 (the API gives one family a slice); else nil
	wide  []netip.Addr // every address otherwise (IPv6, zones, invalid: kept exactly); else nil
	hosts []string     // hostnames by index; nil when no endpoint has one
}

// newEPList builds the list of eps (which it does not keep).
func newEPList(eps []epModel) epList {
	var l epList
	if len(eps) == 0 {
		return l
	}
	all4, named := true, false
	for i := range eps {
		all4 = all4 && eps[i].Addr.Is4()
		named = named || eps[i].Hostname != ""
	}
	if all4 {
		l.v4 = make([][4]byte, len(eps))
		for i := range eps {
			l.v4[i] = eps[i].Addr.As4()
		}
	} else {
		l.wide = make([]netip.Addr, len(eps))
		for i := range eps {
			l.wide[i] = eps[i].Addr
		}
	}
	if named {
		l.hosts = make([]string, len(eps))
		for i := range eps {
			l.hosts[i] = eps[i].Hostname
		}
	}
	return l
}

// len is the number of endpoints.
func (l *epList) len() int { return len(l.v4) + len(l.wide) }

// addr is the address of endpoint i.
func (l *epList) addr(i int) netip.Addr {
	if l.v4 != nil {
		return netip.AddrFrom4(l.v4[i])
	}
	return l.wide[i]
}

// host is the hostname of endpoint i ("" for none).
func (l *epList) host(i int) string {
	if l.hosts == nil {
		return ""
	}
	return l.hosts[i]
}

// at is endpoint i.
func (l *epList) at(i int) epModel { return epModel{Addr: l.addr(i), Hostname: l.host(i)} }

// models returns the endpoints as epModels (a new slice; nil when empty).
func (l *epList) models() []epModel {
	n := l.len()
	if n == 0 {
		return nil
	}
	out := make([]epModel, n)
	for i := range out {
		out[i] = l.at(i)
	}
	return out
}

// IsZero reports an empty list, so that `json:",omitzero"` omits it as
// omitempty omitted an empty []epModel.
func (l epList) IsZero() bool { return l.len() == 0 }

// MarshalJSON encodes the list as the []epModel it replaced.
func (l epList) MarshalJSON() ([]byte, error) {
	eps := l.models()
	if eps == nil {
		eps = []epModel{}
	}
	return json.Marshal(eps)
}

// UnmarshalJSON decodes a []epModel.
func (l *epList) UnmarshalJSON(b []byte) error {
	var eps []epModel
	if err := json.Unmarshal(b, &eps); err != nil {
		return fmt.Errorf("decoding endpoints: %w", err)
	}
	*l = newEPList(eps)
	return nil
}
