package tollgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/jsonscan"
	"github.com/tollgate/tollgate/quota"
)

// What happens once a request is answered: its true cost read from the
// response (costs.Rule.Settle) replaces its estimate, and the slots it
// holds are given back. Costs told by the status (which wins over a
// header or a field of the same bucket) or in headers are settled at
// once; costs told in the body are read as the caller reads it, through a
// wrapper that keeps nothing of the body but the field being read
// (internal/jsonscan), and settled when the caller reaches its end. A body closed before its
// end, or that never tells, keeps the estimate. Slots are given back when
// the body ends or is closed, whichever comes first.

// meter wraps resp's body when something waits for its end, and settles
// what the headers tell now.
func (t *Transport) meter(ctx context.Context, c *call, o outcome, resp *http.Response) *http.Response {
	if o.res == nil && len(o.slots) == 0 {
		return resp
	}
	var fields []costs.Settle
	if o.res != nil {
		var told []settled
		var byStatus []string // the buckets the status settles
		for _, st := range c.endpoint.Settle {
			if st.Status != 0 && st.Status == resp.StatusCode {
				told = append(told, settled{st.Bucket, st.Units, nil})
				byStatus = append(byStatus, st.Bucket)
			}
		}
		for _, st := range c.endpoint.Settle {
			if st.Status != 0 || slices.Contains(byStatus, st.Bucket) {
				continue // the status told it, or does not apply
			}
			if st.Header != "" {
				if v := resp.Header.Get(st.Header); v != "" {
					units, err := parseUnits(v)
					told = append(told, settled{st.Bucket, units, err})
					continue
				}
			}
			if st.Field != "" {
				fields = append(fields, st)
			}
		}
		t.settle(ctx, c, o, told)
	}
	if len(fields) == 0 && len(o.slots) == 0 {
		return resp
	}
	m := &meteredBody{t: t, ctx: ctx, c: c, o: o, body: resp.Body, fields: fields}
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
		return resp
	}
	resp.Body = m
	return resp
}

// settled is a true cost a response told, or why it could not be read.
type settled struct {
	bucket string
	units  int64
	err    error
}

// parseUnits reads a true cost: a whole number of units, at least zero.
func parseUnits(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n > quota.MaxUnits {
		return 0, fmt.Errorf("tollgate: the response tells a cost of %.32q, not a whole number of units", v)
	}
	return n, nil
}

// settle replaces the estimates the response told the truth of, and
// reports each to the hook and the log.
func (t *Transport) settle(ctx context.Context, c *call, o outcome, told []settled) {
	if len(told) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	charges := append([]costs.Charge(nil), c.endpoint.Charges...)
	var errs []error
	for _, s := range told {
		err := s.err
		if err == nil {
			err = o.res.Settle(sctx, s.bucket, s.units)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range charges {
			if charges[i].Bucket == s.bucket {
				charges[i].Units = s.units
			}
		}
	}
	err := errors.Join(errs...)
	if t.cfg.OnSettle != nil {
		t.cfg.OnSettle(ctx, Decision{Endpoint: c.endpoint.Name, Scope: o.scope(c), Caller: CallerOf(ctx), Charges: charges, Estimate: c.endpoint.Charges,
			Admitted: true, At: o.res.Time(), Settled: true, Err: err})
	}
	if err != nil {
		t.log(ctx, slog.LevelWarn, "tollgate: could not settle a request's true cost; it keeps its estimate",
			slog.String("endpoint", c.endpoint.Name), slog.String("scope", o.scope(c)), slog.Any("err", err))
		return
	}
	t.log(ctx, slog.LevelDebug, "tollgate: settled", slog.String("endpoint", c.endpoint.Name),
		slog.String("scope", o.scope(c)), slog.Any("charges", charges))
}

// meteredBody reads a response body for the caller, and settles the true
// cost and gives back the slots when it ends.
type meteredBody struct {
	t      *Transport
	ctx    context.Context
	c      *call
	o      outcome
	body   io.ReadCloser
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

func (m *meteredBody) Read(p []byte) (int, error) {
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

// Close closes the body; a body closed before its end keeps the estimate.
func (m *meteredBody) Close() error {
	err := m.body.Close()
	m.finish(false)
	return err
}

// finish settles what the body told, when it was read to its end, and
// gives back the slots, once.
func (m *meteredBody) finish(complete bool) {
	m.once.Do(func() {
		if complete && m.scan != nil {
			var told []settled
			for i, f := range m.fields {
				if units, ok := m.scan.Number(i); ok {
					told = append(told, settled{f.Bucket, units, nil})
				}
			}
			m.t.settle(m.ctx, m.c, m.o, told)
		}
		m.t.releaseSlots(m.ctx, m.o.slots)
	})
}

// dataField is how a data line of a server-sent event starts.
var dataField = []byte("data:")

// feedEvents feeds the data of server-sent events to the scanner. Lines
// end with LF, CR or CRLF.
func (m *meteredBody) feedEvents(p []byte) {
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
