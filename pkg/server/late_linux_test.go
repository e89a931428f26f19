//go:build linux

package server

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
)

// TestLateQueue checks the hand-over of slow-path replies: to the running
// read loop, taken oldest first, each keeping its own bytes when some stay
// queued, a park refused while replies wait that no flusher sends; while
// the loop is parked or after it ended, to the first worker that queues
// one, as the flusher; refused when full and when larger than a slot.
func TestLateQueue(t *testing.T) {
	l := newLateQueue(nil)
	to := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), uint16(1000+i))
	}
	reply := func(i int) []byte { return []byte(fmt.Sprintf("reply %d", i)) }
	offer := func(i int) (queued, flush bool) { return l.offer(reply(i), to(i)) }
	for i := range 3 {
		if queued, flush := offer(i); !queued || flush {
			t.Fatalf("offer %d to a running loop: got queued %v, flush %v; want queued for the loop", i, queued, flush)
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
	if queued, _ := offer(3); !queued { // into the slot the taken one had
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
	if queued, flush := offer(9); !queued || !flush {
		t.Fatalf("first offer to a parked loop: got queued %v, flush %v; want the offerer to flush", queued, flush)
	}
	if queued, flush := offer(8); !queued || flush {
		t.Fatalf("second offer with a flusher: got queued %v, flush %v; want queued for the flusher", queued, flush)
	}
	l.unpark()
	if !l.park() {
		t.Error("park with replies a flusher sends: got false, want true")
	}
	l.unpark()
	if queued, _ := l.offer(bytes.Repeat([]byte{1}, lateSlot+1), to(0)); queued {
		t.Errorf("offer of %d bytes: queued, want refused (larger than a slot)", lateSlot+1)
	}
	for i := 2; i < lateMax; i++ {
		if queued, _ := offer(i); !queued {
			t.Fatalf("offer %d of %d: refused", i, lateMax)
		}
	}
	if queued, _ := offer(0); queued {
		t.Error("offer to a full queue: queued, want refused")
	}
	got = got[:0]
	if more := l.take(lateMax, put); more || len(got) != lateMax {
		t.Errorf("take: got %d replies, more %v; want the %d queued", len(got), more, lateMax)
	}
	l.flushing = false // as the flusher leaves when it finds nothing more
	l.end()
	if queued, flush := offer(0); !queued || !flush {
		t.Errorf("offer after the loop ended: got queued %v, flush %v; want the offerer to flush", queued, flush)
	}
}
