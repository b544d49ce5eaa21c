package youtube

import "fmt"

// credential holds an API key as a func that returns it. fmt prints a
// func held in a struct as its address, whatever the verb, and never
// calls it; printed directly, a credential's methods write "[redacted]".
// So neither %v, %+v, %#v, %s nor %x of a Transport shows a key.
type credential func() string

// newCredential holds key.
func newCredential(key string) credential { return func() string { return key } }

const redacted = "[redacted]"

// String returns "[redacted]".
func (credential) String() string { return redacted }

// GoString returns "[redacted]", for %#v.
func (credential) GoString() string { return redacted }

// Format writes "[redacted]" for every verb.
func (credential) Format(f fmt.State, _ rune) { fmt.Fprint(f, redacted) }
