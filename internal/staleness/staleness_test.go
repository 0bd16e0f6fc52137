package staleness_test

import (
	"testing"
	"time"

	"github.com/ccmkit/ccmkit/internal/staleness"
)

// lag is a value whose MaxStaleness is itself.
type lag time.Duration

func (l lag) MaxStaleness() time.Duration { return time.Duration(l) }

// ptrLag reports through a pointer, so a typed nil of it would panic.
type ptrLag struct{ d time.Duration }

func (p *ptrLag) MaxStaleness() time.Duration { return p.d }

func TestMax(t *testing.T) {
	var typedNil *ptrLag
	tests := []struct {
		name   string
		reason string
		vs     []any
		want   time.Duration
	}{
		{name: "none", reason: "no value lags", want: 0},
		{name: "not-a-reporter", reason: "a value without MaxStaleness answers fresh", vs: []any{"driver", 3}, want: 0},
		{name: "nil", reason: "a nil value, typed or not, is skipped, not called", vs: []any{nil, typedNil}, want: 0},
		{name: "longest", reason: "the longest of the parts", vs: []any{lag(10 * time.Second), "plain", &ptrLag{time.Minute}, lag(time.Second)}, want: time.Minute},
		{name: "negative", reason: "a negative answer means no lag, never less than none", vs: []any{lag(-time.Hour)}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := staleness.Max(tc.vs...); got != tc.want {
				t.Errorf("Max(%v) = %v, want %v (%s)", tc.vs, got, tc.want, tc.reason)
			}
		})
	}
}
