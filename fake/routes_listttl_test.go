package fake_test

import (
	"testing"
	"time"

	"testing/synctest"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/provider"
)

// TestRoutesListTTL: with routes.listTTL the route table answers
// ListRoutes from its last answer, and what changes the routes outside it
// (a route added through the control surface, an instance terminated, so
// its route Blackhole) drops that answer, as the Table's own writes do.
// It runs in a synctest bubble on the real clock, whose time there is
// virtual: the Table's batch window and the TTL pass without waiting.
func TestRoutesListTTL(t *testing.T) { synctest.Test(t, testRoutesListTTL) }

func testRoutesListTTL(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{Routes: fake.RoutesSection{ListTTL: provider.Duration{Duration: time.Minute}}}, 2, fake.Options{})
	rt := routesOf(t, c)
	if err := rt.CreateRoute(t.Context(), cluster, string(nodes[0].UID), &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: "10.244.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	reads := func() int64 { return c.Calls().ByOp[fake.OpReadRouteTable] }
	list := func(what string, wantReads int64, wantRoutes int) []*cloudprovider.Route {
		t.Helper()
		before := reads()
		got, err := rt.ListRoutes(t.Context(), cluster)
		if err != nil {
			t.Fatalf("ListRoutes %s: %v", what, err)
		}
		if n := reads() - before; n != wantReads || len(got) != wantRoutes {
			t.Errorf("ListRoutes %s: %d table reads and %d routes, want %d and %d", what, n, len(got), wantReads, wantRoutes)
		}
		return got
	}
	list("after the Table wrote", 1, 1)
	list("within the TTL", 0, 1)
	if err := c.AddRoute(fake.Route{Cluster: cluster, Name: "seeded", DestinationCIDR: "10.244.9.0/24", TargetNode: "node-02"}); err != nil {
		t.Fatal(err)
	}
	list("after a route was added through the control surface", 1, 2)
	if _, err := c.TerminateInstance("i-1"); err != nil {
		t.Fatal(err)
	}
	for _, r := range list("after an instance was terminated", 1, 2) {
		if r.TargetNode == "node-01" && !r.Blackhole {
			t.Errorf("route to the terminated instance's node listed without Blackhole")
		}
	}
	time.Sleep(time.Minute) // virtual time: the bubble's clock moves on at once
	list("a TTL later", 1, 2)
}
