// Package handover is the wire protocol by which a new nodecache agent (the
// successor) takes the listening DNS sockets and the warm cache over from the
// running one (the predecessor), over the unix socket --handover-socket. The
// agent's side of it (when to dial, what to check, when to stop reading)
// lives in internal/agent; this package only encodes and decodes.
//
// # Frames
//
// Every message is one frame: a 4-byte big-endian length, then that many
// bytes of JSON encoding a Msg, at most MaxFrame bytes. A frame that carries
// descriptors sends them as one SCM_RIGHTS control message in the same
// sendmsg call as its bytes; a reader takes at most MaxFDs descriptors per
// frame. ReadFrame returns the descriptors it received as *os.File, and
// closes them itself when it returns an error.
//
// # The exchange
//
//	successor   → predecessor  hello{version, pod}
//	predecessor → successor    offer{addrs, udp, tcp, pod} + SCM_RIGHTS(udp+tcp listener fds)
//	predecessor → successor    the warm cache: 4-byte length field, then the dump
//	successor   → predecessor  ready   (it now reads the shared sockets)
//	predecessor → successor    done    (it stopped reading; in-flight queries finished)
//
// The predecessor refuses a hello of another Version by closing the
// connection, and answers error{error} instead of offer when it cannot or
// will not hand over. The offer's descriptors are the UDP listeners, then the
// TCP listeners. The successor starts reading the sockets before it says
// ready and the predecessor stops only after it, so for a moment both read
// them and no queued query is lost.
//
// Who closes what, and when:
//   - The descriptors in the offer are duplicates of the predecessor's
//     listeners: it closes these copies when the exchange ends, and serves on
//     its own listeners until done.
//   - The successor owns the descriptors it received. It closes them when the
//     offer does not pass CheckOffer (another op, a count other than
//     udp+tcp, other addresses, or a descriptor that is not a UDP socket,
//     then a listening TCP or MPTCP socket, bound to an offered address),
//     and otherwise turns them into its listeners.
//   - A failure before ready costs nothing: the predecessor keeps its
//     sockets, and the successor opens its own.
//   - After done the predecessor has closed its end of the handover socket
//     listener, so the successor takes the socket path over; the predecessor
//     then exits without tearing the link and rules down.
//
// # The cache stream
//
// After the offer comes a 4-byte big-endian length field. StreamedCache
// (0xFFFFFFFF) says the dump follows as a stream that ends at its own end
// marker (cache.Export); any other non-zero value is the byte length of the
// dump that follows, as earlier predecessors send it; 0 says no cache
// follows. A successor of an earlier version reads StreamedCache as a length
// of 4 GiB and still stops at the end marker, which is why Version did not
// change when streaming came in. A failed import costs hit rate, not the
// handover.
//
// # Pods
//
// hello.pod is the successor's pod UID and offer.pod the predecessor's, both
// empty outside a pod. The successor records the predecessor's pod; a
// predecessor refuses (with error) a hello from the pod it itself replaced,
// so the sockets never go back to an older revision when that pod's
// container restarts.
//
// # Trust
//
// Whoever answers on the socket is given the agent's DNS traffic, so the
// agent (internal/agent, sockettrust.go) dials it only when the socket
// file and every directory above it belong to root or the agent's uid, and
// the process listening there (SO_PEERCRED) runs as one of them; the
// predecessor checks the successor's credentials on accept. CheckOffer
// then checks every descriptor with the kernel (SO_TYPE, SO_DOMAIN,
// SO_PROTOCOL, SO_ACCEPTCONN, getsockname) before any is used.
//
// # The supervisor's control socket
//
// The same frames carry what a serving process tells its supervisor
// (internal/supervise) over the socket pair it inherits, one way only:
//
//	serving{udp, tcp} + SCM_RIGHTS(listener fds)   once it serves
//	journal + SCM_RIGHTS(the cache journal's file) once, when its journal starts
//	handed-over                                    a successor took the sockets
//
// The supervisor keeps the newest copy of each and closes the one it
// replaces.
//
// The package has no config and no metrics; the agent counts handovers in
// nodecache_handovers_total.
package handover
