package costs

// An Endpoint is what a request resolved to.
type Endpoint struct {
	// Name identifies the endpoint in policies, hooks and errors, e.g.
	// "search.list".
	Name string
	// Charges are the units it spends, at most one per bucket; none, or
	// zero units, for a free endpoint.
	Charges []Charge
	// Free reports requests that cost nothing (Rule.Free): they reserve
	// no units.
	Free bool
	// Continues reports requests that continue a session an earlier
	// request paid for (Rule.Continues): free, and never paused.
	Continues bool
	// Settle says where the response tells the true cost of some charges
	// (Rule.Settle).
	Settle []Settle
}

// Units returns the units the endpoint spends across all its buckets,
// e.g. 101 for a call charged 100 to one bucket and 1 to another.
func (e Endpoint) Units() int64 {
	var n int64
	for _, c := range e.Charges {
		n += c.Units
	}
	return n
}

// endpoint is what the rule's fields say a request resolves to.
func (r *Rule) endpoint() Endpoint {
	return Endpoint{Name: r.Endpoint, Charges: r.Charges, Free: r.Free || r.Continues, Continues: r.Continues, Settle: r.Settle}
}
