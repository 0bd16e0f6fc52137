package fake_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/fake"
)

// TestGovernor: with Config.Governor, a read over the budget is refused
// by the governor and never reaches the cloud API (the fake's counters do
// not see it), while the calls within the budget do; the route table waits
// out the refusal's Retry-After on the cloud's clock and then reads.
func TestGovernor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		c, _ := cloudWithNodes(t, fake.Config{Governor: &fake.GovernorSection{ReadsPerSecond: 1, Burst: 2}}, 1, fake.Options{Clock: clock})
		rt := routesOf(t, c)
		// Each ListRoutes reads the route table once (there are no routes,
		// so no instance list for gone targets): two fit in the burst.
		for i := range 2 {
			if _, err := rt.ListRoutes(t.Context(), cluster); err != nil {
				t.Fatalf("ListRoutes %d within the budget: %v", i+1, err)
			}
		}
		done := make(chan error, 1)
		go func() {
			_, err := rt.ListRoutes(t.Context(), cluster)
			done <- err
		}()
		synctest.Wait() // the third waits for the governor's Retry-After
		select {
		case err := <-done:
			t.Fatalf("ListRoutes over the budget returned before its Retry-After: %v", err)
		default:
		}
		if got := c.Calls().ByOp[fake.OpReadRouteTable]; got != 2 {
			t.Errorf("ReadRouteTable calls: %d, want 2: the burst, and no refused call reaches the cloud", got)
		}
		if got := c.Calls().Throttled; got != 0 {
			t.Errorf("cloud throttled %d calls, want 0: the governor refused them first", got)
		}
		clock.Step(time.Second) // a token, at 1 read per second
		if err := <-done; err != nil {
			t.Errorf("ListRoutes after the Retry-After: %v", err)
		}
		if got := c.Calls().ByOp[fake.OpReadRouteTable]; got != 3 {
			t.Errorf("ReadRouteTable calls: %d, want 3", got)
		}
	})
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
