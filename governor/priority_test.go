package governor_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/governor"
)

// TestAtPriority: under AtPriority(Background) every governed method is
// admitted as a background call (only while the bucket keeps the
// background reserve), whatever its own kind; AtPriority(Urgent) never
// raises a method above its own priority.
func TestAtPriority(t *testing.T) {
	limit := governor.Limit{Rate: 1, Burst: 4, NormalReserve: 1, BackgroundReserve: 2}
	minTokens := map[governor.Priority]int{governor.Urgent: 1, governor.Normal: 2, governor.Background: 3}
	for _, m := range methods {
		for _, tc := range []struct {
			name, reason string
			cap          governor.Priority
			min          int // fewest tokens left before the call for it to be admitted
		}{
			{name: "background", reason: "lowered to background", cap: governor.Background, min: minTokens[governor.Background]},
			{name: "urgent", reason: "a cap never raises", cap: governor.Urgent, min: minTokens[m.priority]},
		} {
			t.Run(m.name+"/"+tc.name, func(t *testing.T) {
				got, want := map[int]bool{}, map[int]bool{}
				for tokens := 0; tokens <= 4; tokens++ {
					g := newGovernor(t, newClock(), governor.Options{Reads: limit, Writes: limit})
					if n, _ := admitted(g, m.class, governor.Urgent, 4-tokens); n != 4-tokens {
						t.Fatalf("could not take %d tokens", 4-tokens)
					}
					_, err := m.call(governor.AtPriority(t.Context(), tc.cap), g, newCloud())
					got[tokens], want[tokens] = err == nil, tokens >= tc.min
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s under AtPriority(%v) admitted by tokens left (-want +got), %s:\n%s", m.name, tc.cap, tc.reason, diff)
				}
			})
		}
	}
}
