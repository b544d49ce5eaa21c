package quota

import (
	"strconv"
	"strings"
)

// checkCharges validates a decision's scope and charges, and returns how
// many windows they name.
func (l *Limiter) checkCharges(scope string, charges []Demand) (int, error) {
	if err := l.check(scope); err != nil {
		return 0, err
	}
	if len(charges) == 0 {
		return 0, invalid("charges", "none given")
	}
	n := 0
	for i, c := range charges {
		if err := c.validate(); err != nil {
			return 0, err
		}
		for j, lim := range c.Limits {
			n++
			if duplicateWindow(charges, i, j) {
				return 0, invalid("charges", "bucket "+strconv.Quote(c.Bucket)+" names window "+lim.windowKey()+" twice")
			}
		}
	}
	return n, nil
}

// withoutBucketLogs returns the keys of the reserve or settle script (the
// metas, then the logs) less the logs when every window of charges is a
// token bucket's, which keeps none: each key sent is a string Redis makes
// for the script, and the common paths on buckets read only the metas.
// Scripts that find keys by place after the logs (fairreserve.lua) take
// decision's keys whole.
func withoutBucketLogs(keys []string, charges []Demand) []string {
	for _, c := range charges {
		for _, lim := range c.Limits {
			if !lim.refilling() {
				return keys
			}
		}
	}
	return keys[:len(keys)/2]
}

// decision checks a decision's input and builds the reserve script's keys
// and arguments, and the sequence number its entries are named by. Named,
// for the background script, it names the decision (entryID) and lists
// the pauses among the keys; otherwise, for the reserve script, which
// names the pauses after the metas, the id's place says where each
// charge's windows start when there are several.
func (l *Limiter) decision(scope string, maxWait int64, charges []Demand, named bool) (keys []string, args []any, seq uint64, err error) {
	n, err := l.checkCharges(scope, charges)
	if err != nil {
		return nil, nil, 0, err
	}
	now, clockArg := l.clockArg()
	d := decision{seq: l.seq.Add(1)}

	// KEYS: the meta per window, (named:) the pause of each bucket and
	// the scope's pause, then the log per window (withoutBucketLogs
	// drops them for the reserve script). ARGV: clock, maxwait,
	// id or where the charges start, then per window: units, room (the
	// limit less units), span.
	d.keys = make([]string, 0, 2*n+len(charges)+1)
	var logs [4]string // the windows' logs; more windows spill to the heap
	windowLogs := logs[:0]
	d.args = make([]any, 0, 3+3*n)
	var id string
	switch {
	case named:
		id = l.entryID(d.seq)
	case len(charges) > 1:
		var b strings.Builder
		first := 1
		for i, c := range charges {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(first))
			first += len(c.Limits)
		}
		id = b.String()
	}
	d.args = append(d.args, clockArg, maxWait, id)
	var scopePause string
	var pauses [4]string // the buckets' pause keys; more charges spill to the heap
	bucketPauses := pauses[:0]
	for _, c := range charges {
		for j, lim := range c.Limits {
			w := l.window(scope, c.Bucket, lim)
			if j == 0 {
				bucketPauses = append(bucketPauses, w.pause)
			}
			d.keys = append(d.keys, w.meta)
			windowLogs = append(windowLogs, w.log)
			d.args = append(d.args, c.Units, lim.Units-c.Units, l.span(w, lim, &now))
			scopePause = w.scopePause
		}
	}
	if named {
		d.keys = append(d.keys, bucketPauses...)
		d.keys = append(d.keys, scopePause)
	}
	d.keys = append(d.keys, windowLogs...)
	return d.keys, d.args, d.seq, nil
}

// entryID is the id of the log entries of the seq-th reservation.
func (l *Limiter) entryID(seq uint64) string {
	return l.idPrefix + strconv.FormatUint(seq, 36)
}

// duplicateWindow reports whether the j-th limit of the i-th charge names a
// bucket window that an earlier one already named.
func duplicateWindow(charges []Demand, i, j int) bool {
	c, w := charges[i], charges[i].Limits[j]
	for k := 0; k <= i; k++ {
		if charges[k].Bucket != c.Bucket {
			continue
		}
		for m, lim := range charges[k].Limits {
			if (k < i || m < j) && lim.sameWindow(w) {
				return true
			}
		}
	}
	return false
}
