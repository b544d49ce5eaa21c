package costs

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Load reads a JSON spec and builds its table. The JSON has the shape of
// Spec; unknown fields are errors, so a misspelt "units" cannot silently
// charge nothing:
//
//	{
//	  "buckets": ["pool"],
//	  "rules": [
//	    {"pattern": "GET api.example.com/v1/search", "endpoint": "search",
//	     "charges": [{"bucket": "pool", "units": 100}]}
//	  ],
//	  "default": {"endpoint": "other", "charges": [{"bucket": "pool", "units": 1}]}
//	}
func Load(r io.Reader) (*Table, error) {
	spec, err := ReadSpec(r)
	if err != nil {
		return nil, err
	}
	return New(spec)
}

// LoadFile reads a JSON spec from a file and builds its table.
func LoadFile(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("costs: %w", err)
	}
	defer f.Close()
	t, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ReadSpec reads a JSON spec without building it, for changing it first.
func ReadSpec(r io.Reader) (Spec, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var spec Spec
	if err := dec.Decode(&spec); err != nil {
		return Spec{}, &invalidError{msg: "costs: reading JSON spec: " + err.Error()}
	}
	if dec.More() {
		return Spec{}, invalidf("reading JSON spec: data after the spec")
	}
	return spec, nil
}
