package testnet

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortIsBindableAndNeverRepeated(t *testing.T) {
	seen := map[uint16]bool{}
	low := ephemeralLow()
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if low-lowest >= 1000 && (int(p) < lowest || int(p) >= low) {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, low)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p)))
		ln, err := net.Listen("tcp4", addr)
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		pc, err := net.ListenPacket("udp4", addr)
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		ln.Close()
		pc.Close()
	}
}

func TestFreeSeesABoundPort(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if free(uint16(ln.Addr().(*net.TCPAddr).Port)) {
		t.Fatal("free says a listening port is free")
	}
}
