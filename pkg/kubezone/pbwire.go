package kubezone

import (
	"errors"
	"fmt"
)

// Wire types of protobuf.
const (
	wireVarint     = 0
	wireFixed64    = 1
	wireBytes      = 2
	wireStartGroup = 3
	wireEndGroup   = 4
	wireFixed32    = 5
)

// pbField is one field of a protobuf message.
type pbField struct {
	num int32
	typ int
	v   uint64 // the value of a varint field
	b   []byte // the value of a length-delimited field (aliases the input)
}

var (
	errTruncated = errors.New("protobuf: truncated message")
	errOverflow  = errors.New("protobuf: varint overflows 64 bits")
	errBadTag    = errors.New("protobuf: illegal tag or wire type")
)

// consumeVarint reads a varint as the generated decoder does (at most ten
// bytes, the bits past 64 dropped); n is the bytes read.
func consumeVarint(b []byte) (v uint64, n int, err error) {
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, errOverflow
		}
		if n >= len(b) {
			return 0, 0, errTruncated
		}
		c := b[n]
		n++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, n, nil
		}
	}
}

// nextField reads the field at the start of b and returns it and the rest.
// Tags and skipped values are read as the generated decoder reads them
// (its field number is the tag's bits above the wire type as an int32;
// groups are skipped by depth, whatever their numbers), so that both
// accept the same messages.
func nextField(b []byte) (pbField, []byte, error) {
	tag, n, err := consumeVarint(b)
	if err != nil {
		return pbField{}, nil, err
	}
	f := pbField{num: int32(tag >> 3), typ: int(tag & 7)}
	if f.num <= 0 || f.typ == wireEndGroup {
		return pbField{}, nil, errBadTag
	}
	rest, err := f.readValue(b[n:])
	return f, rest, err
}

// readValue reads the value of f (its wire type set) at the start of b and
// returns the rest.
func (f *pbField) readValue(b []byte) ([]byte, error) {
	switch f.typ {
	case wireVarint:
		v, n, err := consumeVarint(b)
		f.v = v
		return b[n:], err
	case wireBytes:
		v, rest, err := consumeBytes(b)
		f.b = v
		return rest, err
	case wireStartGroup:
		return skipGroup(b)
	}
	err := skipFixed(&b, f.typ)
	return b, err
}

// consumeBytes reads a length-delimited value at the start of b and
// returns it (aliasing b) and the rest.
func consumeBytes(b []byte) (v, rest []byte, err error) {
	l, n, err := consumeVarint(b)
	if err == nil && l > uint64(len(b)-n) {
		err = errTruncated
	}
	if err != nil {
		return nil, nil, err
	}
	return b[n : n+int(l)], b[n+int(l):], nil
}

// skipFixed skips a fixed-size value of wire type typ at the start of *b.
func skipFixed(b *[]byte, typ int) error {
	size := 4
	switch typ {
	case wireFixed32:
	case wireFixed64:
		size = 8
	default:
		return errBadTag
	}
	if len(*b) < size {
		return errTruncated
	}
	*b = (*b)[size:]
	return nil
}

// skipGroup skips the rest of a group and returns what follows it.
func skipGroup(b []byte) ([]byte, error) {
	for depth := 1; depth > 0; {
		tag, n, err := consumeVarint(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		switch typ := int(tag & 7); typ {
		case wireStartGroup:
			depth++
		case wireEndGroup:
			depth--
		case wireVarint:
			if _, n, err = consumeVarint(b); err != nil {
				return nil, err
			}
			b = b[n:]
		case wireBytes:
			if _, b, err = consumeBytes(b); err != nil {
				return nil, err
			}
		default:
			if err := skipFixed(&b, typ); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// eachField calls fn on every field of message b.
func eachField(b []byte, fn func(f pbField) error) error {
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
		b = rest
	}
	return nil
}

// errWireType is a field read with a wire type its schema does not have;
// the generated decoder refuses these too.
var errWireType = errors.New("protobuf: wrong wire type")

// bytes is the value of a length-delimited field.
func (f pbField) bytes() ([]byte, error) {
	if f.typ != wireBytes {
		return nil, fmt.Errorf("field %d: %w", f.num, errWireType)
	}
	return f.b, nil
}

// varint is the value of a varint field.
func (f pbField) varint() (uint64, error) {
	if f.typ != wireVarint {
		return 0, fmt.Errorf("field %d: %w", f.num, errWireType)
	}
	return f.v, nil
}

// str is the value of a string field, copied.
func (f pbField) str() (string, error) {
	b, err := f.bytes()
	return string(b), err
}
