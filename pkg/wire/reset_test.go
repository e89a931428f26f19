package wire

import (
	"reflect"
	"testing"
	"unsafe"
)

// TestResetClearsEveryField fills every field of a Query, then parses a
// packet too short for a header: every field but ID and the lower buffer
// (reset's exceptions) must read zero, so a field added to Query and
// forgotten in reset fails here rather than leaking one query's state into
// the next.
func TestResetClearsEveryField(t *testing.T) {
	var q Query
	v := reflect.ValueOf(&q).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		case reflect.Uint8, reflect.Uint16:
			f.SetUint(7)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]byte{1}))
		case reflect.Array:
			f.Index(0).SetUint(7)
		default:
			t.Fatalf("field %s of kind %s: teach this test to fill it", v.Type().Field(i).Name, f.Kind())
		}
	}
	if err := Parse([]byte{1, 2, 3}, &q); err != ErrNoReply {
		t.Fatalf("Parse of 3 bytes: %v, want ErrNoReply", err)
	}
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		if name == "ID" || name == "lower" {
			continue
		}
		if !v.Field(i).IsZero() {
			t.Errorf("field %s not cleared by Parse", name)
		}
	}
}

// TestLowerInto checks the eight-at-a-time lowercasing against lower for
// every byte value at every position of a word and in the tail.
func TestLowerInto(t *testing.T) {
	for n := 0; n <= 19; n++ {
		for c := 0; c < 256; c++ {
			for pos := 0; pos < n; pos++ {
				name := make([]byte, n)
				for i := range name {
					name[i] = byte('A' + (i*7+c)%58) // letters, and [\\]^_` between them
				}
				name[pos] = byte(c)
				dst := make([]byte, n+3)
				if got := lowerInto(dst, name); got != n {
					t.Fatalf("lowerInto of %d bytes returned %d", n, got)
				}
				for i := range name {
					if dst[i] != lower(name[i]) {
						t.Fatalf("n=%d pos=%d: byte %d: %#x became %#x, want %#x", n, pos, i, name[i], dst[i], lower(name[i]))
					}
				}
			}
		}
	}
}

// TestLowerName checks that LowerName lowercases letters only and cuts a
// name longer than MaxNameLen there.
func TestLowerName(t *testing.T) {
	if got, want := LowerName([]byte("\x03WwW\x07ExAmPlE\x03c0M\x00")), "\x03www\x07example\x03c0m\x00"; got != want {
		t.Errorf("LowerName = %q, want %q", got, want)
	}
	long := make([]byte, MaxNameLen+10)
	for i := range long {
		long[i] = 'Q'
	}
	if got := LowerName(long); len(got) != MaxNameLen || got[0] != 'q' || got[MaxNameLen-1] != 'q' {
		t.Errorf("LowerName of %d bytes = %d bytes (%q...), want %d of 'q'", len(long), len(got), got[:min(len(got), 4)], MaxNameLen)
	}
}
