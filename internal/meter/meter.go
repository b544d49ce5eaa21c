// Package meter reads a response for a request's true cost
// (costs.Rule.Settle). Costs told by the status (which wins over a header
// or a field of the same bucket) or in headers are read at once (Told);
// costs told in the body are read as the caller reads it, through a Body
// that keeps nothing of it but the fields being read (internal/jsonscan),
// and told when the caller reaches its end. A body closed before its end,
// or that never tells, tells nothing: the estimate stays.
package meter

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/jsonscan"
	"github.com/tollgate/tollgate/quota"
)

// A Cost is a true cost a response told, or why it could not be read.
type Cost struct {
	Bucket string
	Units  int64
	Err    error
}

// Told returns the costs resp's status and headers tell, and the rules
// whose costs its body tells.
func Told(rules []costs.Settle, resp *http.Response) (told []Cost, fields []costs.Settle) {
	var byStatus []string // the buckets the status settles
	for _, st := range rules {
		if st.Status != 0 && st.Status == resp.StatusCode {
			told = append(told, Cost{st.Bucket, st.Units, nil})
			byStatus = append(byStatus, st.Bucket)
		}
	}
	for _, st := range rules {
		if st.Status != 0 || slices.Contains(byStatus, st.Bucket) {
			continue // the status told it, or does not apply
		}
		if st.Header != "" {
			if v := resp.Header.Get(st.Header); v != "" {
				units, err := parseUnits(v)
				told = append(told, Cost{st.Bucket, units, err})
				continue
			}
		}
		if st.Field != "" {
			fields = append(fields, st)
		}
	}
	return told, fields
}

// parseUnits reads a true cost: a whole number of units, at least zero.
func parseUnits(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n > quota.MaxUnits {
		return 0, fmt.Errorf("tollgate: the response tells a cost of %.32q, not a whole number of units", v)
	}
	return n, nil
}

// An Ender hears, once, that a metered body ended: with the costs it told
// when it was read to its end, none when it was closed before.
type Ender interface {
	Ended(told []Cost, complete bool)
}

// A Body reads a response body for the caller, reads the costs of fields
// from it, and tells its Ender when it ends.
type Body struct {
	body   io.ReadCloser
	end    Ender
	fields []costs.Settle
	scan   *jsonscan.Scanner // nil when no field is read

	// In a stream of server-sent events, each event's data is a document
	// of its own: fed to the scanner from after "data:" to the end of the
	// line, the scanner reset at each event's end.
	events    bool
	lineStart bool   // at the start of a line
	prefix    []byte // the start of the line, while it may become "data:"
	inData    bool   // in the value of a data line
	afterCR   bool   // the last line ended with CR: a LF next belongs to it

	once sync.Once
}

// Wrap meters resp's body: end hears when it ends, with the costs fields
// tell. A response without a body ends at once.
func Wrap(resp *http.Response, fields []costs.Settle, end Ender) {
	m := &Body{end: end, body: resp.Body, fields: fields}
	if len(fields) > 0 {
		paths := make([]string, len(fields))
		for i, f := range fields {
			paths[i] = f.Field
		}
		m.scan = jsonscan.New(paths...)
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		m.events = mt == "text/event-stream"
		m.lineStart = true
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		m.finish(true)
		return
	}
	resp.Body = m
}

// Read reads the body, and the costs it tells.
func (m *Body) Read(p []byte) (int, error) {
	n, err := m.body.Read(p)
	if m.scan != nil && n > 0 {
		if m.events {
			m.feedEvents(p[:n])
		} else {
			m.scan.Write(p[:n])
		}
	}
	if err == io.EOF {
		m.finish(true)
	}
	return n, err
}

// Close closes the body; a body closed before its end tells nothing.
func (m *Body) Close() error {
	err := m.body.Close()
	m.finish(false)
	return err
}

// finish tells the Ender, once, what the body told when it was read to its
// end.
func (m *Body) finish(complete bool) {
	m.once.Do(func() {
		var told []Cost
		if complete && m.scan != nil {
			for i, f := range m.fields {
				if units, ok := m.scan.Number(i); ok {
					told = append(told, Cost{f.Bucket, units, nil})
				}
			}
		}
		m.end.Ended(told, complete)
	})
}

// dataField is how a data line of a server-sent event starts.
var dataField = []byte("data:")

// feedEvents feeds the data of server-sent events to the scanner. Lines
// end with LF, CR or CRLF.
func (m *Body) feedEvents(p []byte) {
	for len(p) > 0 {
		if m.afterCR {
			m.afterCR = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		switch {
		case m.inData:
			i := indexLineEnd(p)
			if i < 0 {
				m.scan.Write(p)
				return
			}
			m.scan.Write(p[:i])
			m.scan.Write([]byte{'\n'}) // data lines of one event join with a newline
			m.inData, m.lineStart, m.afterCR, p = false, true, p[i] == '\r', p[i+1:]
		case m.lineStart:
			c := p[0]
			if c == '\n' || c == '\r' {
				if len(m.prefix) == 0 { // an empty line: the event ends
					m.scan.Reset()
				}
				m.prefix, m.afterCR, p = m.prefix[:0], c == '\r', p[1:]
				continue
			}
			m.prefix = append(m.prefix, c)
			p = p[1:]
			switch {
			case len(m.prefix) == len(dataField) && string(m.prefix) == string(dataField):
				m.inData, m.lineStart, m.prefix = true, false, m.prefix[:0]
				if len(p) > 0 && p[0] == ' ' {
					p = p[1:]
				}
			case string(dataField[:len(m.prefix)]) != string(m.prefix):
				m.lineStart, m.prefix = false, m.prefix[:0] // another field: skip the line
			}
		default: // a line that is not data
			i := indexLineEnd(p)
			if i < 0 {
				return
			}
			m.lineStart, m.afterCR, p = true, p[i] == '\r', p[i+1:]
		}
	}
}

// indexLineEnd returns the index of the first line end in p, or -1.
func indexLineEnd(p []byte) int {
	for i, c := range p {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}
