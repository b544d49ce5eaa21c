package quota

import (
	"context"
	"encoding/binary"
	"errors"
	"reflect"
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

// readMeta reads a meta of this format: "#3:", big-endian 8-byte fields
// (at, units, sum, end), the count of closed slices in a byte, more fields
// (until, pause, head, exp, origin, slice), the closed slices (an instant
// and units, 8 bytes each), the leases.
func readMeta(m string) (metaFields, error) {
	var f metaFields
	const head = 3 + 10*8 + 1
	if len(m) < head || m[:3] != "#"+strconv.Itoa(format)+":" {
		return f, errors.New("meta " + strconv.Quote(m) + " is not of format " + strconv.Itoa(format))
	}
	i64 := func(at int) int64 { return int64(binary.BigEndian.Uint64([]byte(m[at : at+8]))) }
	f.at, f.units, f.sum, f.end = i64(3), i64(11), i64(19), i64(27)
	n := int(m[35])
	f.until, f.pause, f.head, f.exp, f.origin, f.slice = i64(36), i64(44), i64(52), i64(60), i64(68), i64(76)
	if len(m) < head+16*n {
		return f, errors.New("meta " + strconv.Quote(m) + " is cut short")
	}
	for k := range n {
		f.closed = append(f.closed, [2]int64{i64(head + 16*k), i64(head + 16*k + 8)})
	}
	f.rest = m[head+16*n:]
	return f, nil
}

// readEntry reads an entry of a log: this format's 16 bytes (an instant
// and units, big-endian), or format 2's "<µs>:<units>".
func readEntry(e string) (at, units int64, err error) {
	if len(e) == 16 && e[0] == 0 {
		b := []byte(e)
		return int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:])), nil
	}
	a, u, ok := strings.Cut(e, ":")
	if !ok {
		return 0, 0, errors.New("entry " + strconv.Quote(e) + " of no format")
	}
	if at, err = strconv.ParseInt(a, 10, 64); err == nil {
		units, err = strconv.ParseInt(u, 10, 64)
	}
	return at, units, err
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
	listed, err := b.client.LRange(context.Background(), log, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, e := range listed {
		at, units, err := readEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, strconv.FormatInt(at, 10)+":"+strconv.FormatInt(units, 10))
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

// writeMeta encodes f as log.lua writes a meta of this format.
func writeMeta(f metaFields) string {
	var b []byte
	b = append(b, "#"+strconv.Itoa(format)+":"...)
	for _, v := range []int64{f.at, f.units, f.sum, f.end} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	b = append(b, byte(len(f.closed)))
	for _, v := range []int64{f.until, f.pause, f.head, f.exp, f.origin, f.slice} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	for _, c := range f.closed {
		b = binary.BigEndian.AppendUint64(b, uint64(c[0]))
		b = binary.BigEndian.AppendUint64(b, uint64(c[1]))
	}
	return string(append(b, f.rest...))
}

// TestMetaRoundTrip: writeMeta and readMeta are each other's inverse, so
// that tests reading metas read what log.lua writes (the suite's tests
// read metas log.lua wrote).
func TestMetaRoundTrip(t *testing.T) {
	f := metaFields{at: 1, units: 2, sum: 3, end: 4, until: 5, pause: 6, head: 7, exp: 8, origin: 9, slice: 10,
		closed: [][2]int64{{11, 12}, {13, 14}}, rest: ";x=1:2"}
	got, err := readMeta(writeMeta(f))
	if err != nil || !reflect.DeepEqual(got, f) {
		t.Errorf("readMeta(writeMeta(%+v)) = %+v, %v", f, got, err)
	}
}
