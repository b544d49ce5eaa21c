package quota

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// metaFields is a window's meta of this format, as log.lua writes it.
type metaFields struct {
	until, end, sum, units, at, head, exp, origin, slice, pause int64
	closed                                                      [][2]int64 // instant and units of each closed slice
	rest                                                        string     // the leases and records
}

// readMeta reads a meta of this format: "#3:", ten big-endian 8-byte
// fields, the count of closed slices in a byte, the closed slices (an
// instant and units, 8 bytes each), the leases.
func readMeta(m string) (metaFields, error) {
	var f metaFields
	const head = 3 + 10*8 + 1
	if len(m) < head || m[:3] != "#"+strconv.Itoa(format)+":" {
		return f, errors.New("meta " + strconv.Quote(m) + " is not of format " + strconv.Itoa(format))
	}
	var v [10]int64
	for i := range v {
		v[i] = int64(binary.BigEndian.Uint64([]byte(m[3+8*i:])))
	}
	f.until, f.end, f.sum, f.units, f.at, f.head, f.exp, f.origin, f.slice, f.pause =
		v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]
	n := int(m[head-1])
	if len(m) < head+16*n {
		return f, errors.New("meta " + strconv.Quote(m) + " is cut short")
	}
	for k := range n {
		e := []byte(m[head+16*k:])
		f.closed = append(f.closed, [2]int64{int64(binary.BigEndian.Uint64(e)), int64(binary.BigEndian.Uint64(e[8:]))})
	}
	f.rest = m[head+16*n:]
	return f, nil
}

// mustMeta reads the meta of l's window of lim for scope's bucket.
func mustMeta(t *testing.T, b *backend, l *Limiter, s, bucket string, lim Limit) metaFields {
	t.Helper()
	_, meta := keysOf(l, s, bucket, lim)
	m, err := b.client.Get(context.Background(), meta).Result()
	if err != nil {
		t.Fatal(err)
	}
	f, err := readMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// logOf returns a window's entries as log.lua orders them: the list's,
// then the closed slices in the meta, each "<µs>:<units>".
func logOf(t *testing.T, b *backend, l *Limiter, s, bucket string, lim Limit) []string {
	t.Helper()
	log, _ := keysOf(l, s, bucket, lim)
	entries, err := b.client.LRange(context.Background(), log, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range mustMeta(t, b, l, s, bucket, lim).closed {
		entries = append(entries, strconv.FormatInt(c[0], 10)+":"+strconv.FormatInt(c[1], 10))
	}
	return entries
}

// metaBuffer is binary.lua's BUFFER: how many closed slices a meta holds
// before they are pushed to the list.
const metaBuffer = 8

// TestMetaBufferMatchesTheScripts: metaBuffer is binary.lua's BUFFER.
func TestMetaBufferMatchesTheScripts(t *testing.T) {
	if want := "\nlocal BUFFER = " + strconv.Itoa(metaBuffer) + "\n"; !strings.Contains(binaryPart, want) {
		t.Errorf("binary.lua does not say %q", want)
	}
}
