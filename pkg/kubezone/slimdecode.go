package kubezone

import (
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// An EndpointSlice watch event decoded by client-go's generated code is a
// full object (managed fields, labels, annotations, owner references,
// topology of every endpoint) that trim throws away at once: most of an
// agent's CPU and allocation per update under churn. decodeSliceProto reads
// the protobuf of an EndpointSlice straight into the slim trim would make
// of it, and skips the rest without allocating. FuzzDecodeSliceProto checks
// it against trim(generated decode).
//
// The field numbers are those of k8s.io/api/discovery/v1/generated.proto
// and k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto; Kubernetes
// never renumbers a released field. Semantics follow the generated
// decoder: a repeated message field merges, the last scalar wins, a map's
// last entry for a key wins.

// sliceMeta is what a slim keeps of an ObjectMeta, plus the two metadata
// values the zone and the reflector read: the service-name label and the
// initial-events-end annotation of a streaming list's bookmark.
type sliceMeta struct {
	name, namespace, resourceVersion, uid string
	created                               time.Time
	lastField                             time.Time // latest managedFields time
	hasField                              bool      // a managedFields entry has a time
	service                               string    // label kubernetes.io/service-name
	initialEventsEnd                      bool      // annotation k8s.io/initial-events-end is "true"
}

// written is the object's last write time, as lastWrite computes it.
func (m *sliceMeta) written() time.Time {
	if m.hasField && m.lastField.After(m.created) {
		return m.lastField
	}
	return m.created
}

// decodeSliceProto decodes an EndpointSlice message (the raw bytes of a
// runtime.Unknown) into the slim trim makes of it.
func decodeSliceProto(b []byte) (*slim, error) {
	var (
		md       sliceMeta
		addrType string
		ports    []portModel
		buf      [16]epModel // newEPList copies them: most slices need no other array
		eps      = buf[:0]
	)
	err := eachField(b, func(f pbField) (err error) {
		switch f.num {
		case 1: // metadata
			var v []byte
			if v, err = f.bytes(); err == nil {
				err = md.decode(v)
			}
		case 2: // endpoints
			var v []byte
			if v, err = f.bytes(); err == nil {
				eps, err = decodeEndpoint(v, eps)
			}
		case 3: // ports
			var v []byte
			if v, err = f.bytes(); err == nil {
				ports, err = decodePort(v, ports)
			}
		case 4: // addressType
			addrType, err = f.str()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("decoding EndpointSlice: %w", err)
	}
	s := &slim{name: md.name, namespace: md.namespace, resourceVersion: md.resourceVersion, uid: types.UID(md.uid),
		written: md.written()}
	if m := sliceModelFor(md.namespace, md.name, md.service, addrType); m != nil {
		m.Ports, m.Endpoints = ports, newEPList(eps)
		s.model = m
	} else if md.initialEventsEnd {
		s.model = initialEventsEnd{} // a streaming list's last event, a bookmark
	}
	return s, nil
}

// bytesPair reads the length-delimited fields 1 and 2 of message b (a map
// entry's key and value, a TypeMeta's apiVersion and kind).
func bytesPair(b []byte) (one, two []byte, err error) {
	err = eachField(b, func(f pbField) (err error) {
		switch f.num {
		case 1:
			one, err = f.bytes()
		case 2:
			two, err = f.bytes()
		}
		return err
	})
	return one, two, err
}

// decode merges ObjectMeta message b into m.
func (m *sliceMeta) decode(b []byte) error {
	return eachField(b, func(f pbField) (err error) {
		switch f.num {
		case 1:
			m.name, err = f.str()
		case 3:
			m.namespace, err = f.str()
		case 5:
			m.uid, err = f.str()
		case 6:
			m.resourceVersion, err = f.str()
		case 8: // creationTimestamp
			var v []byte
			if v, err = f.bytes(); err == nil {
				m.created, err = decodeTime(v)
			}
		case 11, 12: // labels, annotations
			var v []byte
			if v, err = f.bytes(); err == nil {
				// v aliases b: the entry and what follows it in the metadata
				err = m.mapEntry(f.num, b[cap(b)-cap(v):], len(v))
			}
		case 17: // managedFields
			var v []byte
			if v, err = f.bytes(); err == nil {
				err = m.managedFields(v)
			}
		}
		return err
	})
}

// mapEntry reads one entry of the labels (11) or annotations (12) map: the
// first n bytes of b, followed by the rest of the metadata. It reads as the
// generated decoder does: a key or value is length-delimited whatever its
// wire type says and may run past the entry into the rest of b (the entry
// then ends there); other fields are skipped within the entry.
func (m *sliceMeta) mapEntry(num int32, b []byte, n int) error {
	var key, val []byte
	for i := 0; i < n; {
		tag, k, err := consumeVarint(b[i:])
		if err != nil {
			return err
		}
		switch field := int32(tag >> 3); field {
		case 1, 2:
			l, k2, err := consumeVarint(b[i+k:])
			if err == nil && l > uint64(len(b)-i-k-k2) {
				err = errTruncated
			}
			if err != nil {
				return err
			}
			v := b[i+k+k2 : i+k+k2+int(l)]
			if field == 1 {
				key = v
			} else {
				val = v
			}
			i += k + k2 + int(l)
		default: // skipped within the entry, whatever its field number
			f := pbField{typ: int(tag & 7)}
			if f.typ == wireEndGroup || i+k > n {
				return errBadTag
			}
			rest, err := f.readValue(b[i+k : n])
			if err != nil {
				return err
			}
			i = n - len(rest)
		}
	}
	switch {
	case num == 11 && string(key) == discoveryv1.LabelServiceName:
		m.service = string(val)
	case num == 12 && string(key) == metav1.InitialEventsAnnotationKey:
		m.initialEventsEnd = string(val) == "true"
	}
	return nil
}

// managedFields reads the time of one ManagedFieldsEntry.
func (m *sliceMeta) managedFields(b []byte) error {
	var t time.Time
	has := false
	err := eachField(b, func(f pbField) (err error) {
		if f.num == 4 {
			var v []byte
			if v, err = f.bytes(); err == nil {
				t, err = decodeTime(v)
				has = true
			}
		}
		return err
	})
	if err == nil && has && (!m.hasField || t.After(m.lastField)) {
		m.lastField, m.hasField = t, true
	}
	return err
}

// decodeTime decodes a metav1.Time as its generated decoder does: empty is
// the zero time, else whole seconds (nanoseconds are dropped).
func decodeTime(b []byte) (time.Time, error) {
	if len(b) == 0 {
		return time.Time{}, nil
	}
	var secs int64
	err := eachField(b, func(f pbField) (err error) {
		switch f.num {
		case 1:
			var v uint64
			v, err = f.varint()
			secs = int64(v)
		case 2:
			_, err = f.varint()
		}
		return err
	})
	return time.Unix(secs, 0), err
}

// decodeEndpoint appends the ready addresses of Endpoint message b to eps.
// Its conditions and host name may follow its addresses: a first pass
// reads them, a second the addresses (without keeping them in between).
func decodeEndpoint(b []byte, eps []epModel) ([]epModel, error) {
	var (
		hostname *string
		ready    *bool
	)
	err := eachField(b, func(f pbField) (err error) {
		switch f.num {
		case 1: // addresses, read below
			_, err = f.bytes()
		case 2: // conditions, merged
			var v []byte
			if v, err = f.bytes(); err == nil {
				err = eachField(v, func(f pbField) error {
					if f.num != 1 {
						return nil
					}
					r, err := f.varint()
					ready = new(r != 0)
					return err
				})
			}
		case 3: // hostname
			var s string
			if s, err = f.str(); err == nil {
				hostname = &s
			}
		}
		return err
	})
	if err != nil {
		return eps, err
	}
	var addr [1][]byte
	err = eachField(b, func(f pbField) error {
		if f.num == 1 {
			addr[0] = f.b
			eps = appendReady(eps, ready, hostname, addr[:])
		}
		return nil
	})
	return eps, err
}

// decodePort appends EndpointPort message b to ports when it has a port.
func decodePort(b []byte, ports []portModel) ([]portModel, error) {
	var (
		name, proto *string
		port        *int32
	)
	err := eachField(b, func(f pbField) (err error) {
		switch f.num {
		case 1, 2:
			var s string
			if s, err = f.str(); err == nil && f.num == 1 {
				name = &s
			} else if err == nil {
				proto = &s
			}
		case 3:
			var v uint64
			v, err = f.varint()
			port = new(int32(v))
		}
		return err
	})
	if err != nil || port == nil {
		return ports, err
	}
	return append(ports, slicePortModel(name, proto, *port)), nil
}
