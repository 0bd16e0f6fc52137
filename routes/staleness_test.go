package routes_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/routes"
)

// lag, embedded beside a driver or an InstanceChecker, makes it report
// MaxStaleness lag: a provider's part that answers from a cache of its
// own.
type lag time.Duration

func (l lag) MaxStaleness() time.Duration { return time.Duration(l) }

func TestTableMaxStaleness(t *testing.T) {
	fresh := instanceCheckerFunc(func(context.Context, []types.NodeName) ([]types.NodeName, error) { return nil, nil })
	stale := struct {
		routes.InstanceChecker
		lag
	}{fresh, lag(time.Minute)}
	tests := []struct {
		name   string
		reason string
		opts   routes.Options
		lag    time.Duration // the driver's MaxStaleness
		want   time.Duration
	}{
		{name: "default", reason: "without a ListTTL every ListRoutes reads the cloud", want: 0},
		{name: "list TTL", reason: "a remembered answer serves for ListTTL", opts: routes.Options{ListTTL: 30 * time.Second}, want: 30 * time.Second},
		{name: "fresh checker", reason: "an InstanceChecker without MaxStaleness counts 0", opts: routes.Options{ListTTL: 30 * time.Second, Instances: fresh}, want: 30 * time.Second},
		{name: "stale checker", reason: "without a ListTTL, Blackhole is as late as the checker", opts: routes.Options{Instances: stale}, want: time.Minute},
		{name: "stale checker and list TTL", reason: "an answer remembered for ListTTL may hold what the checker answered a minute late",
			opts: routes.Options{ListTTL: 30 * time.Second, Instances: stale}, want: time.Minute + 30*time.Second},
		{name: "stale driver", reason: "the driver's own lag adds to ListTTL", opts: routes.Options{ListTTL: 30 * time.Second}, lag: 10 * time.Second, want: 40 * time.Second},
		{name: "stale driver and checker", reason: "ListTTL plus the longer of the two",
			opts: routes.Options{ListTTL: 30 * time.Second, Instances: stale}, lag: 10 * time.Second, want: time.Minute + 30*time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole, err := routes.NewWholeTable(struct {
				*memTable
				lag
			}{&memTable{}, lag(tt.lag)}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			perRoute, err := routes.NewTable(struct {
				*memRoutes
				lag
			}{&memRoutes{}, lag(tt.lag)}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			for kind, tbl := range map[string]*routes.Table{"whole table": whole, "per route": perRoute} {
				if got := tbl.MaxStaleness(); got != tt.want {
					t.Errorf("%s: MaxStaleness() = %v, want %v (%s)", kind, got, tt.want, tt.reason)
				}
			}
		})
	}
}

// TestTableMaxStalenessBoundsTheLag checks MaxStaleness against what the
// Table does: a route deleted behind its back is still listed until
// MaxStaleness after the read, and gone from then on.
func TestTableMaxStalenessBoundsTheLag(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(0, 0))
	m := &memTable{}
	tbl, err := routes.NewWholeTable(m, routes.Options{ClusterID: "c1", ListTTL: 20 * time.Second, Clock: clock, BatchWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.CreateRoute(t.Context(), "", "uid-1", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	listed := func(want int, why string) {
		t.Helper()
		rs, err := tbl.ListRoutes(t.Context(), "")
		if len(rs) != want || err != nil {
			t.Errorf("ListRoutes = %d routes, %v; want %d, nil (%s)", len(rs), err, want, why)
		}
	}
	listed(1, "the Table's own route")
	lag := tbl.MaxStaleness()
	if lag != 20*time.Second {
		t.Fatalf("MaxStaleness() = %v, want the ListTTL, 20s", lag)
	}
	m.mu.Lock()
	m.entries = nil // deleted by hand
	m.mu.Unlock()
	clock.Step(lag - time.Nanosecond)
	listed(1, "the deletion is not seen before the answer is MaxStaleness old")
	clock.Step(time.Nanosecond)
	listed(0, "the deletion shows at MaxStaleness")
}
