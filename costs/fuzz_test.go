package costs

import (
	"bytes"
	"errors"
	"net/http"
	"testing"
)

// FuzzLoad feeds the JSON loader arbitrary documents: it must never panic,
// and a table it accepts must only ever resolve to usable charges.
//
//	go test ./costs -run '^$' -fuzz FuzzLoad -fuzztime 5m
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"buckets":["pool"],"rules":[{"pattern":"GET api.example.com/v1/search","endpoint":"search","charges":[{"bucket":"pool","units":100}]}]}`))
	f.Add([]byte(`{"buckets":["pool","s"],"rules":[{"pattern":"/{x}/y","endpoint":"e","charges":[{"bucket":"s","units":1},{"bucket":"pool","units":3}]}],"default":{"endpoint":"d","charges":[{"bucket":"pool","units":1}]}}`))
	f.Add([]byte(`{"buckets":["pool"],"rules":[{"pattern":"GET /a","endpoint":"a","charges":[{"bucket":"pool","units":1}]},{"pattern":"GET /a","endpoint":"b","charges":[{"bucket":"pool","units":1}]}]}`))
	f.Add([]byte(`{"buckets":["pool"],"rules":[{"pattern":"GET h/{a}/{a}","endpoint":"e","charges":[{"bucket":"pool","units":1125899906842625}]}]}`))
	f.Add([]byte(`{"rules":[{"pattern":"POST /{rest...}","endpoint":"x"}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		tab, err := Load(bytes.NewReader(doc))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Load error %v does not match ErrInvalid", err)
			}
			return
		}
		for _, m := range []string{"GET", "POST", "DELETE"} {
			for _, u := range []string{"https://api.example.com/v1/search", "https://h/a/b", "http://x/", "https://h/a//b/../c"} {
				req, _ := http.NewRequest(m, u, nil)
				e, err := tab.Resolve(req)
				if err != nil {
					if !errors.Is(err, ErrUnknownEndpoint) {
						t.Fatalf("Resolve(%s %s) = %v", m, u, err)
					}
					continue
				}
				if e.Name == "" || len(e.Charges) == 0 {
					t.Fatalf("Resolve(%s %s) = %+v: no name or no charges", m, u, e)
				}
				for _, c := range e.Charges {
					if c.Units <= 0 || c.Units > maxUnits {
						t.Fatalf("Resolve(%s %s) charged %d units", m, u, c.Units)
					}
				}
			}
		}
	})
}
