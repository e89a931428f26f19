package kubezone

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// watch opens a watch from w.rv (a streaming list when list is set) and
// applies its events until the stream ends. It returns nil when the server
// ends the stream.
func (w *sliceWatch) watch(ctx context.Context, list bool) error {
	timeout := int64(300 + rand.IntN(300)) // 5 to 10 minutes, as client-go's reflector
	o := metav1.ListOptions{Watch: true, ResourceVersion: w.rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout}
	if list {
		send := true
		o.SendInitialEvents, o.ResourceVersionMatch = &send, metav1.ResourceVersionMatchNotOlderThan
		w.startList()
	} else {
		w.armed = true
	}
	err := w.stream(ctx, o)
	w.flush()
	if w.seen != nil { // a streaming list cut short: list again
		w.seen, w.rv = nil, ""
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// stream opens the watch o and reads it until it ends, or until it has
// been silent for w.idle.
func (w *sliceWatch) stream(ctx context.Context, o metav1.ListOptions) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	frames := new(atomic.Uint64)
	w.frames = frames
	go func() { // the idle check: ends with the stream
		t := time.NewTicker(w.idle)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				if frames.Swap(0) == 0 {
					cancel(errWatchIdle)
					return
				}
			}
		}
	}()
	body, err := w.rc.Get().Resource("endpointslices").VersionedParams(&o, scheme.ParameterCodec).
		SetHeader("Accept", runtime.ContentTypeProtobuf).Stream(sctx)
	if err == nil {
		defer body.Close()
		err = w.read(sctx, body)
	}
	if errors.Is(context.Cause(sctx), errWatchIdle) && ctx.Err() == nil {
		return errWatchIdle
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("endpointslices watch: %w", err)
	}
	return err
}

// read reads and handles frames from a watch stream until it ends.
func (w *sliceWatch) read(ctx context.Context, body io.Reader) error {
	br := bufio.NewReaderSize(body, watchReadBuffer)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return io.EOF
			}
			return fmt.Errorf("reading: %w", err)
		}
		// Bounded as a uint32, before it becomes an int: on a 32-bit build
		// int(uint32) of a length past 2 GiB is negative.
		n32 := binary.BigEndian.Uint32(hdr[:])
		if n32 > maxWatchFrame {
			if hdr[0] == '{' {
				return errors.New("the watch stream is JSON, not protobuf: something between the agent and " +
					"the API server answers for it without honouring the Accept header")
			}
			return fmt.Errorf("a frame of %d bytes, over the %d limit", n32, maxWatchFrame)
		}
		n := int(n32)
		if cap(w.frame) < n {
			w.frame = make([]byte, n)
		}
		frame := w.frame[:n]
		if _, err := io.ReadFull(br, frame); err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		if w.frames != nil {
			w.frames.Add(1)
		}
		if err := w.handle(frame); err != nil {
			return err
		}
		if len(w.pending) >= applyChunk || !frameBuffered(br) {
			w.flush()
		}
	}
}

// frameBuffered says whether br holds a whole next frame, so that reading
// it will not block: until then, what was read waits to be applied with it.
func frameBuffered(br *bufio.Reader) bool {
	if br.Buffered() < 4 {
		return false
	}
	hdr, err := br.Peek(4)
	return err == nil && uint64(br.Buffered()) >= 4+uint64(binary.BigEndian.Uint32(hdr))
}
