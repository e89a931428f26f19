package handover

import (
	"encoding/hex"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// goldenFrames are the bytes the handover code wrote before it moved into
// this package (cmd/nodecache at f555729): the wire format must not change,
// or a successor and a predecessor of different builds cannot hand over.
var goldenFrames = []struct {
	msg Msg
	fds int
	hex string
}{
	{Msg{Op: OpHello, Version: Version, Pod: "pod-b"}, 0,
		"000000287b226f70223a2268656c6c6f222c2276657273696f6e223a312c22706f64223a22706f642d62227d"},
	{Msg{Op: OpOffer, Addrs: []string{"169.254.20.10:53", "[fd00::a]:53"}, UDP: 2, TCP: 2, Pod: "pod-a"}, 2,
		"000000587b226f70223a226f66666572222c226164647273223a5b223136392e3235342e32302e31303a3533222c225b666430303a3a615d3a3533225d2c22756470223a322c22746370223a322c22706f64223a22706f642d61227d"},
	{Msg{Op: OpReady}, 0, "0000000e7b226f70223a227265616479227d"},
	{Msg{Op: OpDone}, 0, "0000000d7b226f70223a22646f6e65227d"},
	{Msg{Op: OpError, Error: "this pod was superseded by pod pod-a"}, 0,
		"0000003d7b226f70223a226572726f72222c226572726f72223a227468697320706f6420776173207375706572736564656420627920706f6420706f642d61227d"},
}

// TestWriteFrameGolden: WriteFrame writes the old bytes, with the
// descriptors as one SCM_RIGHTS message on the frame's first byte.
func TestWriteFrameGolden(t *testing.T) {
	for _, g := range goldenFrames {
		t.Run(string(g.msg.Op), func(t *testing.T) {
			w, r := unixPair(t)
			defer r.Close()
			files := openFiles(t, g.fds)
			errc := make(chan error, 1)
			go func() { errc <- WriteFrame(w, g.msg, files); _ = w.Close() }()
			buf := make([]byte, 4096)
			oob := make([]byte, unix.CmsgSpace(MaxFDs*4))
			n, oobn, _, _, err := r.ReadMsgUnix(buf, oob)
			if err != nil {
				t.Fatal(err)
			}
			rest, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("WriteFrame: %v", err)
			}
			if got := hex.EncodeToString(append(buf[:n], rest...)); got != g.hex {
				t.Errorf("frame bytes:\ngot  %s\nwant %s", got, g.hex)
			}
			cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, c := range cmsgs {
				if c.Header.Level != unix.SOL_SOCKET || c.Header.Type != unix.SCM_RIGHTS {
					t.Errorf("control message level %d type %d, want SOL_SOCKET SCM_RIGHTS", c.Header.Level, c.Header.Type)
				}
				fds, err := unix.ParseUnixRights(&c)
				if err != nil {
					t.Fatal(err)
				}
				for i, fd := range fds {
					sameFile(t, files[got+i], fd)
					_ = unix.Close(fd)
				}
				got += len(fds)
			}
			if got != g.fds || (g.fds > 0 && len(cmsgs) != 1) {
				t.Errorf("descriptors: got %d in %d control messages, want %d in one", got, len(cmsgs), g.fds)
			}
		})
	}
}

// TestReadFrameGolden: ReadFrame decodes the old bytes to the same message
// and hands out the descriptors sent with them, in order.
func TestReadFrameGolden(t *testing.T) {
	for _, g := range goldenFrames {
		t.Run(string(g.msg.Op), func(t *testing.T) {
			w, r := unixPair(t)
			defer r.Close()
			raw, _ := hex.DecodeString(g.hex)
			sent := openFiles(t, g.fds)
			if _, _, err := w.WriteMsgUnix(raw, rights(sent), nil); err != nil {
				t.Fatal(err)
			}
			_ = w.Close()
			var m Msg
			files, err := ReadFrame(r, &m)
			defer CloseFiles(files)
			if err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			if !reflect.DeepEqual(m, g.msg) {
				t.Errorf("got %+v, want %+v", m, g.msg)
			}
			if len(files) != g.fds {
				t.Fatalf("descriptors: got %d, want %d", len(files), g.fds)
			}
			for i, f := range files {
				sameFile(t, sent[i], int(f.Fd()))
			}
		})
	}
}

// TestReadFrameErrors: a frame that is too large or not JSON is an error,
// and the descriptors that came with it are closed, not leaked.
func TestReadFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		name, frame, want string
	}{
		{"too large", "\x00\x01\x00\x01{}", "too large"},
		{"not json", "\x00\x00\x00\x04oops", "decoding handover frame"},
		{"cut short", "\x00\x00\x00\x10{}", "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, r := unixPair(t)
			defer r.Close()
			sent := openFiles(t, 2)
			before := openFDs(t)
			if _, _, err := w.WriteMsgUnix([]byte(tc.frame), rights(sent), nil); err != nil {
				t.Fatal(err)
			}
			_ = w.Close()
			var m Msg
			files, err := ReadFrame(r, &m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadFrame: got error %v, want one containing %q", err, tc.want)
			}
			if len(files) != 0 {
				t.Errorf("got %d descriptors with an error, want none", len(files))
			}
			// w is closed, so one descriptor fewer than before sending.
			if after := openFDs(t); after != before-1 {
				t.Errorf("open descriptors: got %d, want %d (the received ones closed)", after, before-1)
			}
		})
	}
}

func openFiles(tb testing.TB, n int) []*os.File {
	tb.Helper()
	var files []*os.File
	for range n {
		f, err := os.CreateTemp(tb.TempDir(), "fd")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = f.Close() })
		files = append(files, f)
	}
	return files
}

// sameFile fails unless fd refers to the same file as f.
func sameFile(tb testing.TB, f *os.File, fd int) {
	tb.Helper()
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		tb.Fatal(err)
	}
	if err := unix.Fstat(fd, &b); err != nil {
		tb.Fatal(err)
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		tb.Errorf("descriptor %d: got file %d/%d, want %s (%d/%d)", fd, b.Dev, b.Ino, f.Name(), a.Dev, a.Ino)
	}
}

func openFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(ents)
}
