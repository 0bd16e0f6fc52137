package loadbalancer_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// TestDeclarations: a built Reconciler hands back the declarations it was
// given, the same Set (so that a generator reads what the Reconciler
// validates) and the Capabilities, zero ones included.
func TestDeclarations(t *testing.T) {
	set, _ := testAnnotations(t)
	for _, tc := range []struct {
		name, reason string
		opts         loadbalancer.Options
	}{
		{name: "declared", reason: "the Set and Capabilities of Options", opts: loadbalancer.Options{Annotations: set, Capabilities: loadbalancer.Capabilities{UDP: true, SourceRanges: true}}},
		{name: "nothing", reason: "nil Set and zero Capabilities stay so, not defaulted", opts: loadbalancer.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := loadbalancer.NewReconciler(newMemDriver(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Annotations(); got != tc.opts.Annotations {
				t.Errorf("%s: Annotations() = %p, want Options.Annotations %p", tc.reason, got, tc.opts.Annotations)
			}
			if diff := cmp.Diff(tc.opts.Capabilities, r.Capabilities()); diff != "" {
				t.Errorf("%s: Capabilities() (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
