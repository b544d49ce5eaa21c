package tollgate

import "context"

// A Trace holds the functions a Transport calls as a request goes through
// it (Config.Trace), each one when its event happens. Every field is
// optional: a nil field is not called, and the zero Trace calls nothing.
// The functions are called by many requests at once: each must be safe for
// concurrent use, and quick, as most run on the goroutine of the request
// itself (the caller of RoundTrip, or the reader of its response's body),
// as each field says. The context is the request's, or, for what Close
// gives back, one of Close's own.
//
// Merge stacks two Traces, so that observers (metrics, logs, tests) each
// install their own.
type Trace struct {
	// Decided is called once per request with its decision, after any
	// wait, before the request is sent (or instead, when it is not), and
	// again with each new decision of a request decided again because it
	// reached Base later than Transit after its admission. It runs on the
	// caller of RoundTrip.
	Decided func(ctx context.Context, d Decision)

	// WaitStarted is called when a request takes a hold and is about to
	// sleep until its turn: the Decision's At is when the turn comes.
	// Decided follows when the wait ends. It runs on the caller of
	// RoundTrip.
	WaitStarted func(ctx context.Context, d Decision)

	// WaitEnded is called when a wait that WaitStarted reported ends,
	// once per WaitStarted: the Decision's Waited is how long it waited,
	// Admitted whether its turn came, and Err, when it did not, why (a
	// *QuotaError when MaxWait passed, the context's error when the
	// caller gave up). A request decided again, because an announcement
	// changed its bucket's limit or a pause reached it while it waited,
	// or because it reached Base later than Transit after its admission,
	// may wait more than once. It runs on the caller of RoundTrip.
	WaitEnded func(ctx context.Context, d Decision)

	// Settled is called when a response tells a request's true cost
	// (costs.Rule.Settle): the Decision's Charges are what the request
	// now counts (Settled is true, Estimate what it was admitted with),
	// and its Err says why an estimate was kept instead. A cost told by
	// the status or the headers is settled on the caller of RoundTrip;
	// one told in the body, on the goroutine that reads the body to its
	// end.
	Settled func(ctx context.Context, d Decision)

	// Reconciled is called when a response's announcement of a bucket's
	// quota (Bucket.Follows) changed the shared count, taught a limit, or
	// paused the bucket. It runs on the caller of RoundTrip whose response
	// announced it.
	Reconciled func(ctx context.Context, r Reconciliation)

	// Switched is called on every switch between Redis and the outage
	// modes, on the caller of RoundTrip whose request noticed it.
	Switched func(ctx context.Context, s Switch)

	// Slot is called when a request takes a slot of a bucket's cap on
	// requests in flight (Bucket.MaxInFlight), held true, and when it
	// gives the slot back, held false: once each per slot, so that the
	// slots a process holds are the takes less the gives. It runs on the
	// goroutine that took or gave the slot: the caller of RoundTrip, the
	// reader or closer of the response's body, or the caller of Close.
	Slot func(ctx context.Context, scope, bucket string, held bool)

	// WouldRefuse is called when the Shadow action (Policy.OnRefusal)
	// sends a request that its quota had no room for: the Decision's
	// Shadow is true, Err the *QuotaError it would have had (its Cause:
	// no room, a cap full, the local share spent), RetryAfter when it
	// would have fit. Decided follows, as for any request sent. It runs
	// on the caller of RoundTrip.
	WouldRefuse func(ctx context.Context, d Decision)

	// Paused is called when a response says the upstream's quota is
	// spent (see Config.ReadResponse) and the scope or its buckets pause.
	// It runs on the caller of RoundTrip.
	Paused func(ctx context.Context, p UpstreamPause)

	// Burning is called when the burn-rate alert of a window this process
	// spends in starts (Alert.Firing true: at the rates of spending over
	// both of its spans, the window is spent before its units come back)
	// and when it ends, once each per window and process. Crossed is
	// called when a window this process spends in crosses one of
	// Config.Thresholds of its limit, once per crossing. Setting either
	// starts a goroutine that reads, every few seconds and off the
	// requests' path, the windows this process admitted requests in since
	// its last read (none while it is idle); both run on that goroutine,
	// with a context of its own. See docs/foresight.md.
	Burning func(ctx context.Context, a Alert)
	Crossed func(ctx context.Context, a Alert)
}

// Merge returns a Trace whose every field calls t's function, then u's.
// Where only one of them has a function, the result has that function
// itself, so merging adds no cost to a field only one side traces.
func (t Trace) Merge(u Trace) Trace {
	return Trace{
		Decided:     merge(t.Decided, u.Decided),
		WaitStarted: merge(t.WaitStarted, u.WaitStarted),
		WaitEnded:   merge(t.WaitEnded, u.WaitEnded),
		Settled:     merge(t.Settled, u.Settled),
		Reconciled:  merge(t.Reconciled, u.Reconciled),
		Switched:    merge(t.Switched, u.Switched),
		Slot:        mergeSlot(t.Slot, u.Slot),
		WouldRefuse: merge(t.WouldRefuse, u.WouldRefuse),
		Paused:      merge(t.Paused, u.Paused),
		Burning:     merge(t.Burning, u.Burning),
		Crossed:     merge(t.Crossed, u.Crossed),
	}
}

// merge returns a function that calls f, then g; or the one that is set.
func merge[T any](f, g func(context.Context, T)) func(context.Context, T) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(ctx context.Context, v T) {
		f(ctx, v)
		g(ctx, v)
	}
}

// mergeSlot is merge for Trace.Slot.
func mergeSlot(f, g func(ctx context.Context, scope, bucket string, held bool)) func(ctx context.Context, scope, bucket string, held bool) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(ctx context.Context, scope, bucket string, held bool) {
		f(ctx, scope, bucket, held)
		g(ctx, scope, bucket, held)
	}
}
