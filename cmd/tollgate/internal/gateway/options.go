package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// positiveOptions are the options that, when given, must be positive: a
// quota, a window or a reserve of 0 would otherwise silently mean the
// provider's default (a "quota": 0 meant 10,000).
var positiveOptions = map[string]bool{
	"quota": true, "search_quota": true, "upload_quota": true, "batch_stats_quota": true,
	"rpm": true, "tpm": true, "rpd": true, "tpd": true, "itpm": true, "otpm": true,
	"window": true, "minute": true, "hour": true,
}

// reserveOptions are the reserves: 0 would silently mean the provider's
// default (5%), so it is refused; a negative reserve_percent means none,
// as the providers' Options say.
var reserveOptions = map[string]bool{"reserve_percent": true, "reserve_units": true}

// checkPositive refuses a quota or window option of zero or less (an
// empty window too), and a reserve of zero (and negative units), naming
// it; classes' limits are named with their class, e.g.
// classes.claude-haiku-4.rpm.
func checkPositive(prefix string, raw json.RawMessage) error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil // not an object: decoding says so
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		v := bytes.TrimSpace(fields[name])
		if name == "classes" {
			var classes map[string]json.RawMessage
			if json.Unmarshal(v, &classes) == nil {
				for _, c := range slices.Sorted(maps.Keys(classes)) {
					if err := checkPositive(prefix+"classes."+c+".", classes[c]); err != nil {
						return err
					}
				}
			}
			continue
		}
		var n float64
		var d string
		isNumber := json.Unmarshal(v, &n) == nil
		switch {
		case reserveOptions[name] && isNumber && n == 0:
			return fmt.Errorf("option %s%s 0: leave it out for the default (5%%), or give reserve_percent -1 for no reserve", prefix, name)
		case reserveOptions[name] && name == "reserve_units" && isNumber && n < 0:
			return fmt.Errorf("option %s%s %s: must be positive (leave it out for the default)", prefix, name, v)
		case !positiveOptions[name]:
			continue
		case isNumber && n <= 0:
			return fmt.Errorf("option %s%s %s: must be positive (leave it out for the default)", prefix, name, v)
		case json.Unmarshal(v, &d) == nil && d == "":
			return fmt.Errorf("option %s%s \"\": want a positive Go duration, e.g. \"10s\" (leave it out for the default)", prefix, name)
		}
	}
	return nil
}

// decodeOptions decodes an upstream's options into v; unknown options are
// errors, and so is a quota or window of zero or less, or a reserve of 0.
func decodeOptions(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	if err := checkPositive("", raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		// encoding/json says "json: unknown field \"x\"".
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return fmt.Errorf("unknown option %s", f)
		}
		return fmt.Errorf("options: %s", oneLine(msg))
	}
	return nil
}

// duration reads an option's Go duration; "" is 0.
func duration(name, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("option %s %q: want a positive Go duration, e.g. \"10s\"", name, v)
	}
	return d, nil
}
