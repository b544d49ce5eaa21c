package tollgateotel

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The attribute keys.
const (
	endpointKey = attribute.Key("tollgate.endpoint")
	resultKey   = attribute.Key("tollgate.rate_limiting.result")
	bucketKey   = attribute.Key("tollgate.bucket")
	scopeKey    = attribute.Key("tollgate.scope")
	reasonKey   = attribute.Key("tollgate.pause.reason")
	stateKey    = attribute.Key("tollgate.redis.state")
	windowKey   = attribute.Key("tollgate.window")
	callerKey   = attribute.Key("tollgate.caller")
	// thresholdKey is a crossing's threshold, as a fraction: "0.8".
	thresholdKey = attribute.Key("tollgate.window.threshold")
	causeKey     = attribute.Key("tollgate.refusal.cause")
)

// A shape is the keys of an attribute set, but for the scope.
type shape uint8

const (
	byEndpointResult shape = iota
	byEndpointBucket
	byEndpoint
	byBucket
	byReasonBucket
	byState
	byBucketWindow
	byBucketCause
)

// shapeKeys are each shape's keys.
var shapeKeys = [...][2]attribute.Key{
	byEndpointResult: {endpointKey, resultKey},
	byEndpointBucket: {endpointKey, bucketKey},
	byEndpoint:       {endpointKey},
	byBucket:         {bucketKey},
	byReasonBucket:   {reasonKey, bucketKey},
	byState:          {stateKey},
	byBucketWindow:   {bucketKey, windowKey},
	byBucketCause:    {bucketKey, causeKey},
}

// attrs names one set of attributes: a shape and its values, then the
// scope and the caller; an empty value leaves its key out. Only values are
// hashed when it is looked up, on every request: the keys come with the
// shape.
type attrs struct {
	shape                 shape
	v1, v2, scope, caller string
}

// options are the measurement options of one attribute set, built once:
// an attribute set built per measurement would allocate on every request.
type options struct {
	add     []metric.AddOption
	record  []metric.RecordOption
	observe []metric.ObserveOption
}

// maxCached bounds the attribute sets cached: past it (scopes by the
// thousand, with WithScopes), a new set is built for each measurement.
const maxCached = 4096

// optionCache holds the options of every attribute set met so far.
type optionCache struct{ cowMap[attrs, *options] }

// get returns the options of a's attribute set.
func (c *optionCache) get(a attrs) *options {
	if o, ok, _ := c.load(a); ok {
		return o
	}
	keys := shapeKeys[a.shape]
	kvs := make([]attribute.KeyValue, 0, 4)
	for _, kv := range [...]struct {
		k attribute.Key
		v string
	}{{keys[0], a.v1}, {keys[1], a.v2}, {scopeKey, a.scope}, {callerKey, a.caller}} {
		if kv.k != "" && kv.v != "" {
			kvs = append(kvs, kv.k.String(kv.v))
		}
	}
	set := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return c.add(a, &options{
		add: []metric.AddOption{set}, record: []metric.RecordOption{set}, observe: []metric.ObserveOption{set},
	}, maxCached)
}
