// Package access lets package quota/ops reach what an operators' tool
// needs of a *quota.Limiter, which package quota does not export: the
// reads and writes only operators call. It follows grpc-go's internal
// func vars: package quota fills Of in when it is initialized, and
// package ops reads it; no other package may import this one.
//
// The types here have the fields of package ops's own, so that ops
// converts them; L and D stand for quota.Limit and quota.Description,
// which this package cannot name (quota imports it).
package access

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Operator is what package ops reaches of one *quota.Limiter: its
// client and key prefix, and the operations quota implements on them.
// Each func's doc is that of package ops's method of the same name.
type Operator[L, D any] struct {
	Client redis.UniversalClient
	Prefix string

	Survey      func(ctx context.Context, scope string) ([]StoredScope[D], error)
	Activity    func(ctx context.Context, scope, bucket string, limit L) (Activity, error)
	Series      func(ctx context.Context, scope, bucket string, limit L) (Series, error)
	Description func(ctx context.Context, scope, bucket string) (D, bool, error)
	Resume      func(ctx context.Context, scope, bucket string) (int, error)
	Confirm     func(ctx context.Context, wait time.Duration, act func(ctx context.Context) error) (Reach, error)
	Tenants     func(ctx context.Context, scope, bucket string, limit L, now time.Time) ([]Tenant, error)
}

// Tenant is ops.Tenant.
type Tenant struct {
	Name        string
	Units, Held int64
	Seen        time.Time
	Waiting     int
}

// Of is set by package quota when it is initialized: a
// func(*quota.Limiter) Operator[quota.Limit, quota.Description]. It is an
// any because this package cannot name quota's types.
var Of any

// StoredScope is ops.StoredScope.
type StoredScope[D any] struct {
	Scope   string
	Hashed  bool
	Paused  bool
	Buckets []StoredBucket[D]
}

// StoredBucket is ops.StoredBucket.
type StoredBucket[D any] struct {
	Bucket      string
	Description *D
	Windows     []string
	Paused      bool
	Announced   bool
	Slots       bool
	Err         error
}

// Activity is ops.Activity.
type Activity struct {
	Now               time.Time
	Leases            int
	Leased            int64
	LeasedUntil       time.Time
	InFlight          int
	SlotWaiters       int
	BackgroundWaiters int
}

// Series is what ops.Series is built from: the fields of the
// quota.Usage read (less its Limit and Remaining), and the slices.
type Series struct {
	Now, NextFree, Reset, PausedUntil time.Time
	Used, Held                        int64
	Slices                            []Slice
}

// Slice is ops.Slice.
type Slice struct {
	At    time.Time
	Units int64
}

// Reach is ops.Reach.
type Reach struct {
	Listening int
	Applied   int
}
