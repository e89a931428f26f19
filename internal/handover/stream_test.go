package handover

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestCacheHeader: the streamed marker leaves the dump unbounded (it ends at
// its own end marker), a length bounds it, 0 means no cache, and a short
// field is an error.
func TestCacheHeader(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCacheHeader(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.Bytes(); !bytes.Equal(got, []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Fatalf("WriteCacheHeader: got % x, want ff ff ff ff", got)
	}
	for _, tc := range []struct {
		name     string
		in       string
		wantSize uint32
		wantDump string // "-" for no dump
		wantErr  error
	}{
		{"streamed", "\xff\xff\xff\xffdump and more", StreamedCache, "dump and more", nil},
		{"length", "\x00\x00\x00\x04dump and more", 4, "dump", nil},
		{"none", "\x00\x00\x00\x00after", 0, "-", nil},
		{"short", "\x00\x00", 0, "-", io.ErrUnexpectedEOF},
		{"closed", "", 0, "-", io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dump, size, err := ReadCacheHeader(bytes.NewReader([]byte(tc.in)))
			if !errors.Is(err, tc.wantErr) || size != tc.wantSize {
				t.Fatalf("got size %d, error %v; want %d, %v", size, err, tc.wantSize, tc.wantErr)
			}
			if tc.wantDump == "-" {
				if dump != nil {
					t.Fatalf("got a dump reader, want none")
				}
				return
			}
			got, err := io.ReadAll(dump)
			if err != nil || string(got) != tc.wantDump {
				t.Errorf("dump: got %q, %v; want %q", got, err, tc.wantDump)
			}
		})
	}
}
