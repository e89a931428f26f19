package handover

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Version is the protocol version a successor sends in its hello; a
// predecessor hands over only to the same version.
const Version = 1

const (
	// MaxFrame is the largest frame body a reader accepts, in bytes.
	MaxFrame = 64 << 10
	// MaxFDs is how many descriptors a reader takes with one frame.
	MaxFDs = 256
)

// Op names a message.
type Op string

// The messages, in the order of the exchange (see the package doc).
const (
	OpHello Op = "hello"
	OpOffer Op = "offer"
	OpReady Op = "ready"
	OpDone  Op = "done"
	OpError Op = "error"
)

// The messages a serving process sends its supervisor (internal/supervise)
// on their control socket; see the package doc.
const (
	OpServing    Op = "serving"     // + SCM_RIGHTS(udp+tcp listener fds)
	OpJournal    Op = "journal"     // + SCM_RIGHTS(the cache journal's file)
	OpHandedOver Op = "handed-over" // a successor took the sockets
)

// Msg is the JSON body of a frame. Fields a message does not use stay zero
// and are left out of the encoding.
type Msg struct {
	Op      Op       `json:"op"`
	Version int      `json:"version,omitempty"` // hello
	Addrs   []string `json:"addrs,omitempty"`   // offer: the listeners' addresses
	UDP     int      `json:"udp,omitempty"`     // offer: UDP descriptors, sent first
	TCP     int      `json:"tcp,omitempty"`     // offer: TCP descriptors, after them
	Error   string   `json:"error,omitempty"`   // error: why there is no offer
	// Pod is the sender's pod UID (--pod-uid), empty outside a pod: the
	// successor's in hello, the predecessor's in offer.
	Pod string `json:"pod,omitempty"`
	// Backend is, in a serving message to the supervisor, the iptables
	// flavour the rules were written with ("nft", "legacy"), so that the
	// next serving process uses it rather than detecting it again.
	Backend string `json:"backend,omitempty"`
}

// WriteFrame sends m as one length-prefixed frame, with files as
// SCM_RIGHTS in the same message. The caller keeps ownership of files, and
// their blocking mode stays as it was (see rawFDs).
func WriteFrame(c *net.UnixConn, m Msg, files []*os.File) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	fds, err := rawFDs(files)
	if err != nil {
		return err
	}
	defer func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	buf := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	buf = append(buf, body...)
	_, _, err = c.WriteMsgUnix(buf, oob, nil)
	return err
}

// rawFDs duplicates the descriptors of files for sending. It reads them
// through SyscallConn, not os.File.Fd: Fd switches a descriptor to blocking
// mode, and a socket's duplicates share that mode with the listener the
// sender still serves on.
func rawFDs(files []*os.File) ([]int, error) {
	fds := make([]int, 0, len(files))
	for _, f := range files {
		rc, err := f.SyscallConn()
		if err != nil {
			return closeFDs(fds, fmt.Errorf("reading descriptor of %s: %w", f.Name(), err))
		}
		var d int
		var derr error
		if err := rc.Control(func(fd uintptr) { d, derr = unix.Dup(int(fd)) }); err != nil || derr != nil {
			return closeFDs(fds, fmt.Errorf("duplicating descriptor of %s: %w", f.Name(), errors.Join(err, derr)))
		}
		fds = append(fds, d)
	}
	return fds, nil
}

func closeFDs(fds []int, err error) ([]int, error) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
	return nil, err
}

// ReadFrame reads one frame written by WriteFrame into m and returns the
// descriptors that came with it, which the caller then owns. On an error
// it has closed them. io.EOF means the peer closed before a frame began.
func ReadFrame(c *net.UnixConn, m *Msg) ([]*os.File, error) {
	buf := make([]byte, MaxFrame)
	oob := make([]byte, unix.CmsgSpace(MaxFDs*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf[:4], oob)
	if err != nil {
		return nil, err
	}
	files, err := parseRights(oob[:oobn])
	if err != nil {
		return nil, err
	}
	if n < 4 {
		if _, err := io.ReadFull(c, buf[n:4]); err != nil {
			CloseFiles(files)
			return nil, err
		}
	}
	size := binary.BigEndian.Uint32(buf)
	if size > uint32(len(buf)) {
		CloseFiles(files)
		return nil, fmt.Errorf("handover frame of %d bytes is too large", size)
	}
	if _, err := io.ReadFull(c, buf[:size]); err != nil {
		CloseFiles(files)
		return nil, err
	}
	if err := json.Unmarshal(buf[:size], m); err != nil {
		CloseFiles(files)
		return nil, fmt.Errorf("decoding handover frame: %w", err)
	}
	return files, nil
}

// parseRights turns the SCM_RIGHTS descriptors in oob into files; control
// messages of other kinds are skipped.
func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parsing control message: %w", err)
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("handover-fd-%d", fd)))
		}
	}
	return files, nil
}

// CloseFiles closes every file, ignoring errors: for descriptors received
// or sent in a handover that will not be used.
func CloseFiles(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
