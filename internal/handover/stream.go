package handover

import (
	"encoding/binary"
	"io"
	"math"
)

// StreamedCache in the cache's length field says that the dump is streamed
// and ends at its own end marker (cache.Export). A successor of an earlier
// version reads it as a length of 4 GiB and still stops at the end marker,
// so Version stays the same.
const StreamedCache = math.MaxUint32

// WriteCacheHeader writes the length field of a streamed cache; the dump
// follows on w.
func WriteCacheHeader(w io.Writer) error {
	return binary.Write(w, binary.BigEndian, uint32(StreamedCache))
}

// ReadCacheHeader reads the cache's length field from r and returns the
// reader the dump is to be read from, and the field's value. dump is nil
// when no cache follows (a field of 0). A streamed dump is read from r
// itself up to its end marker; a dump sent with its length is limited to
// that length.
func ReadCacheHeader(r io.Reader) (dump io.Reader, size uint32, err error) {
	if err := binary.Read(r, binary.BigEndian, &size); err != nil {
		return nil, 0, err
	}
	switch size {
	case 0:
		return nil, 0, nil
	case StreamedCache:
		return r, size, nil
	default:
		return io.LimitReader(r, int64(size)), size, nil
	}
}
