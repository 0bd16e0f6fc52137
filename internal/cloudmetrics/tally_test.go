package cloudmetrics_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
)

// TestTally: the Tally of a context counts the calls Meter records with
// it, by operation (a cache's List for a look-up it answered, which no
// Meter records, counts in the same Tally); Writes counts the
// operations that change the cloud; a context without a Tally counts
// nowhere.
func TestTally(t *testing.T) {
	ctx, tally := cloudmetrics.StartTally(context.Background())
	call := func(ctx context.Context, op string) {
		_ = cloudmetrics.Meter(ctx, "loadbalancer", op, func(context.Context) error { return nil })
	}
	call(ctx, "Apply")
	call(ctx, "Apply")
	call(ctx, "Find")
	call(ctx, "List") // a cache's List for a look-up it answered: the look-up is not metered, the List is
	call(context.Background(), "Delete")
	if diff := cmp.Diff(map[string]int{"Apply": 2, "Find": 1, "List": 1}, tally.Calls()); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
	if got := tally.Total(); got != 4 {
		t.Errorf("Total = %d, want 4", got)
	}
	if got := tally.Writes(); got != 2 {
		t.Errorf("Writes = %d, want 2 (the Applies)", got)
	}
	for op, want := range map[string]bool{"Apply": true, "Delete": true, "ApplyPool": true, "DeletePool": true, "WriteTable": true,
		"CreateRoute": true, "DeleteRoute": true, "Find": false, "List": false, "ListPools": false, "ReadTable": false, "GetByID": false} {
		if got := cloudmetrics.IsWrite(op); got != want {
			t.Errorf("IsWrite(%q) = %v, want %v", op, got, want)
		}
	}
}
