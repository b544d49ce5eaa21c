package gateway

// secret holds a token or a key as a func that returns it: fmt prints a
// func held in a struct as its address, whatever the verb, so a Config
// printed whole shows no secret.
type secret func() string

// newSecret holds s; "" is none (nil).
func newSecret(s string) secret {
	if s == "" {
		return nil
	}
	return func() string { return s }
}

// get returns the secret, or "" for none.
func (s secret) get() string {
	if s == nil {
		return ""
	}
	return s()
}
