package provider

import (
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/costs"
)

// The checks of the options that the providers with limits by name
// (openai's models, anthropic's classes, gemini's models) make alike: what
// differs between them is what their limits are and how they count, not
// how a misconfiguration is told.

// CheckLimits returns an error naming the first of the limits that check
// refuses: those of named (Options.<option>[name]), then def
// (Options.Limits), prefixed with the provider's name; or nil.
func CheckLimits[L any](provider, option string, named map[string]L, def L, check func(L) error) error {
	for name, l := range named {
		if err := check(l); err != nil {
			return fmt.Errorf("%s: Options.%s[%q]: %w", provider, option, name, err)
		}
	}
	if err := check(def); err != nil {
		return fmt.Errorf("%s: Options.Limits: %w", provider, err)
	}
	return nil
}

// Sets returns the sets of limits a provider's Learn takes: def under ""
// and each of named (Options.<option>), every one of which must have a
// name, a kind of set ("model", "class") to the user.
func Sets[L any](provider, option, kind string, def L, named map[string]L) (map[string]L, error) {
	sets := map[string]L{"": def}
	for name, l := range named {
		if name == "" {
			return nil, errors.New(provider + ": Options." + option + " has a " + kind + " with no name; set Options.Limits instead")
		}
		sets[name] = l
	}
	return sets, nil
}

// Costs builds the cost table a provider charges by: spec, or def when
// spec sets neither a rule nor a default (Options.Table's zero value). Its
// error is prefixed with the provider's name.
func Costs(provider string, spec, def costs.Spec) (*costs.Table, error) {
	if len(spec.Rules) == 0 && spec.Default == nil {
		spec = def
	}
	ct, err := costs.New(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", provider, err)
	}
	return ct, nil
}
