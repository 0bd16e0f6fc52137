package fake_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/governor"
)

// TestGovernor: with Config.Governor, a read over the budget is refused
// at once with a RetryError wrapping governor.ErrOverBudget and never
// reaches the cloud API (the fake's counters do not see it), while the
// calls within the budget do.
func TestGovernor(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	c, _ := cloudWithNodes(t, fake.Config{Governor: &fake.GovernorSection{ReadsPerSecond: 1, Burst: 2}}, 1, fake.Options{Clock: clock})
	rt := routesOf(t, c)
	// The first ListRoutes reads the route table (the one route read it
	// needs: there are no routes, so no instance list for gone targets).
	if _, err := rt.ListRoutes(t.Context(), cluster); err != nil {
		t.Fatalf("ListRoutes within the budget: %v", err)
	}
	var refused error
	for range 3 {
		if _, refused = rt.ListRoutes(t.Context(), cluster); refused != nil {
			break
		}
	}
	var retry *api.RetryError
	if !errors.Is(refused, governor.ErrOverBudget) || !errors.As(refused, &retry) || retry.RetryAfter() <= 0 {
		t.Fatalf("ListRoutes over the budget: %v, want an error wrapping governor.ErrOverBudget and an api.RetryError with a positive RetryAfter", refused)
	}
	if got := c.Calls().ByOp[fake.OpReadRouteTable]; got != 2 {
		t.Errorf("ReadRouteTable calls: %d, want 2: the burst, and no refused call reaches the cloud", got)
	}
	if got := c.Calls().Throttled; got != 0 {
		t.Errorf("cloud throttled %d calls, want 0: the governor refused them first", got)
	}
	now = now.Add(retry.RetryAfter())
	if _, err := rt.ListRoutes(t.Context(), cluster); err != nil {
		t.Errorf("ListRoutes after the RetryAfter %v: %v", retry.RetryAfter(), err)
	}
}

func TestGovernorConfigInvalid(t *testing.T) {
	tests := []struct {
		name string
		g    fake.GovernorSection
		want string
	}{
		{name: "negative reads", g: fake.GovernorSection{ReadsPerSecond: -1}, want: "governor: Invalid value"},
		{name: "negative burst", g: fake.GovernorSection{Burst: -1}, want: "Burst -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fake.New(fake.Config{Governor: &tc.g}, fake.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("fake.New with governor %+v: %v, want an error containing %q", tc.g, err, tc.want)
			}
		})
	}
	if _, err := fake.New(fake.Config{Governor: &fake.GovernorSection{}}, fake.Options{}); err != nil {
		t.Errorf("fake.New with an empty governor section (the governor's defaults): %v", err)
	}
}
