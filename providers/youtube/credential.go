package youtube

import "fmt"

// credential is an API key held by the Transport. However it is printed
// (%v, %+v, %#v, %s, %q, a struct holding it dumped by a debugger's
// formatter or a log line), it shows "[redacted]", never the key.
type credential string

const redacted = "[redacted]"

// String returns "[redacted]".
func (credential) String() string { return redacted }

// GoString returns "[redacted]", for %#v.
func (credential) GoString() string { return redacted }

// Format writes "[redacted]" for every verb.
func (credential) Format(f fmt.State, _ rune) { fmt.Fprint(f, redacted) }
