package server

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
)

// TestLateQueue checks the hand-over of slow-path replies to the read
// loop: taken oldest first, each keeping its own bytes when some stay
// queued; refused while the loop is parked, after it ended, when full and
// when larger than a slot; and a park refused while replies wait.
func TestLateQueue(t *testing.T) {
	l := newLateQueue()
	to := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), uint16(1000+i))
	}
	reply := func(i int) []byte { return []byte(fmt.Sprintf("reply %d", i)) }
	for i := range 3 {
		if !l.offer(reply(i), to(i)) {
			t.Fatalf("offer %d to a running loop: refused", i)
		}
	}
	if l.park() {
		t.Fatal("park with 3 replies queued: got true, want false (they are sent first)")
	}
	type sent struct {
		b  string
		to netip.AddrPort
	}
	var got []sent
	put := func(b []byte, to netip.AddrPort) { got = append(got, sent{string(b), to}) }
	if more := l.take(1, put); !more || len(got) != 1 || got[0] != (sent{"reply 0", to(0)}) {
		t.Fatalf("take(1) of 3: got %v, more %v; want reply 0 and more", got, more)
	}
	if !l.offer(reply(3), to(3)) { // into the slot the taken one had
		t.Fatal("offer after a take: refused")
	}
	if more := l.take(lateMax, put); more || len(got) != 4 {
		t.Fatalf("take(all): got %v, more %v; want 4 in all and none left", got, more)
	}
	for i, g := range got {
		if g != (sent{string(reply(i)), to(i)}) {
			t.Errorf("reply %d: got %q to %v, want %q to %v", i, g.b, g.to, reply(i), to(i))
		}
	}

	if !l.park() {
		t.Fatal("park with nothing queued: got false")
	}
	if l.offer(reply(9), to(9)) {
		t.Error("offer to a parked loop: taken, want refused (the worker sends it)")
	}
	l.unpark()
	if l.offer(bytes.Repeat([]byte{1}, lateSlot+1), to(0)) {
		t.Errorf("offer of %d bytes: taken, want refused (larger than a slot)", lateSlot+1)
	}
	for i := range lateMax {
		if !l.offer(reply(i), to(i)) {
			t.Fatalf("offer %d of %d: refused", i, lateMax)
		}
	}
	if l.offer(reply(0), to(0)) {
		t.Error("offer to a full queue: taken, want refused")
	}
	l.end()
	got = got[:0]
	if more := l.take(lateMax, put); more || len(got) != lateMax {
		t.Errorf("take after end: got %d replies, more %v; want the %d queued", len(got), more, lateMax)
	}
	if l.offer(reply(0), to(0)) {
		t.Error("offer after end: taken, want refused")
	}
}
