// Package staleness reads the MaxStaleness of the values ccmkit's blocks
// wrap, so that every block reports it up the composition the same way:
// a layer that answers from a cache adds its own window to the staleness
// of what it wraps (Of); a layer that forwards reports the longest of its
// parts (Max). provider.Staleness states the contract.
package staleness

import (
	"time"

	"github.com/ccmkit/ccmkit/internal/check"
)

// reporter is provider.Staleness, declared again here so that packages
// that do not import provider (routes) can read it.
type reporter interface{ MaxStaleness() time.Duration }

// Of returns v's MaxStaleness when v implements it, and 0 when it does
// not or is nil (a typed nil included: its method could panic). A
// negative answer counts as 0. It calls nothing else of v.
func Of(v any) time.Duration {
	r, ok := v.(reporter)
	if !ok || check.IsNil(v) {
		return 0
	}
	return max(r.MaxStaleness(), 0)
}

// Max returns the longest Of of vs; 0 for none.
func Max(vs ...any) time.Duration {
	var longest time.Duration
	for _, v := range vs {
		longest = max(longest, Of(v))
	}
	return longest
}
