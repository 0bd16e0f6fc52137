package scale

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/fake"
)

// The cost descriptions of the tests: the zero value (a flat cloud with
// shared pools), backends per load balancer (DigitalOcean, Linode, OCI,
// the fake's default) and OpenStack Octavia's hierarchy (a load balancer,
// then per port a listener, a pool, a batch member write and a health
// monitor; a Node change one member write per pool; a cascading delete).
var (
	flatShared = CloudCosts{}
	perService = CloudCosts{BackendPools: BackendPoolsPerService}
	octavia    = CloudCosts{CreateWritesPerPort: 4, BackendPools: BackendPoolsPerPort}
)

// The shapes of the tests: 10 Nodes and 5 Services, as the package's
// runs of the fake, interleaved (Node i joins after Services 0 to i-1
// exist) or Nodes first, with the simulator's one-port Services or three
// ports. With 5 Services the load balancers existing as Nodes 0 to 9
// join are 0, 1, 2, 3, 4, 5, 5, 5, 5, 5: 35 in all, and 9 Nodes join
// after the first.
var (
	interleaved = shape{nodes: 10, services: 5, ports: 1, lb: true, routes: true}
	nodesFirst  = shape{nodes: 10, services: 5, ports: 1, nodesFirst: true, lb: true, routes: true}
	threePorts  = shape{nodes: 10, services: 5, ports: 3, lb: true, routes: true}
)

// The Why of each scenario with the zero CloudCosts, as it was before the
// costs could be stated: BENCHMARKS.md quotes these figures.
const (
	flatBringUpWhy = "a read per new Node; a confirming read and a create per Service; the shared backend pool created, then written per Node joining after it; a route-table read, a route per Node"
	flatChurnWhy   = "a read per gone and per new instance; a backend-pool write per Node leaving or joining; a route created per new Node, deleted per gone one"
	flatDeleteWhy  = "a read of the load balancers, a delete per Service and of the shared backend pool"
)

// churned is the Nodes the tests' churn replaces: 10% of 10.
const churned = 1

// TestCloudMinimum computes each scenario's cloud minimum under the
// three cost descriptions and a few more, the figures worked out by hand
// in the comments. Reads never depend on the costs: bring-up reads a new
// Node's instance (10), confirms each Service's absent load balancer (5)
// and reads the route table (1): 16; churn reads each gone and each new
// instance: 2.
func TestCloudMinimum(t *testing.T) {
	tests := []struct {
		name                     string
		w                        shape
		costs                    CloudCosts
		bringUp, churn, deletion CloudMinimum
		reason                   string
	}{
		{
			name: "zero value, interleaved", w: interleaved, costs: flatShared,
			// 5 creates + the pool's creation + 9 pool writes (the Nodes
			// after the first Service) + 10 routes = 25; churn: a pool
			// write per Node leaving or joining (2) + a route created and
			// one deleted (2) = 4; deletion: 5 deletes + the pool = 6.
			bringUp:  CloudMinimum{Reads: 16, Writes: 25, Why: flatBringUpWhy},
			churn:    CloudMinimum{Reads: 2, Writes: 4, Why: flatChurnWhy},
			deletion: CloudMinimum{Reads: 1, Writes: 6, Why: flatDeleteWhy},
			reason:   "the zero value keeps the figures and words of a flat cloud with shared pools",
		},
		{
			name: "zero value, Nodes first", w: nodesFirst, costs: flatShared,
			// 5 creates + the pool's creation + no Node after a Service +
			// 10 routes = 16.
			bringUp:  CloudMinimum{Reads: 16, Writes: 16, Why: flatBringUpWhy},
			churn:    CloudMinimum{Reads: 2, Writes: 4, Why: flatChurnWhy},
			deletion: CloudMinimum{Reads: 1, Writes: 6, Why: flatDeleteWhy},
			reason:   "with Config.NodesFirst every Node is in the pool's creation",
		},
		{
			name: "per load balancer, interleaved", w: interleaved, costs: perService,
			// 5 creates + 35 backend writes (a write per load balancer
			// existing as each Node joins) + 10 routes = 50; churn: 2
			// changes × 5 load balancers + 2 routes = 12; deletion: 5
			// deletes, no pool.
			bringUp: CloudMinimum{Reads: 16, Writes: 50,
				Why: "a read per new Node; a confirming read and a create per Service; per Node joining, a backend write per load balancer created before it (Target.CloudCosts: a backend pool per Service); a route-table read, a route per Node"},
			churn: CloudMinimum{Reads: 2, Writes: 12,
				Why: "a read per gone and per new instance; per Node leaving or joining, a backend write per load balancer (Target.CloudCosts: a backend pool per Service); a route created per new Node, deleted per gone one"},
			deletion: CloudMinimum{Reads: 1, Writes: 5,
				Why: "a read of the load balancers, a delete per Service (Target.CloudCosts: a backend pool per Service)"},
			reason: "without shared pools each Node change is a write to every load balancer, and no pool is deleted",
		},
		{
			name: "per load balancer, Nodes first", w: nodesFirst, costs: perService,
			// 5 creates, each with every Node + 10 routes = 15.
			bringUp: CloudMinimum{Reads: 16, Writes: 15,
				Why: "a read per new Node; a confirming read and a create per Service; per Node joining, a backend write per load balancer created before it (Target.CloudCosts: a backend pool per Service); a route-table read, a route per Node"},
			churn: CloudMinimum{Reads: 2, Writes: 12,
				Why: "a read per gone and per new instance; per Node leaving or joining, a backend write per load balancer (Target.CloudCosts: a backend pool per Service); a route created per new Node, deleted per gone one"},
			deletion: CloudMinimum{Reads: 1, Writes: 5,
				Why: "a read of the load balancers, a delete per Service (Target.CloudCosts: a backend pool per Service)"},
			reason: "no Node joins after a load balancer exists",
		},
		{
			name: "hierarchical, the simulator's one port", w: interleaved, costs: octavia,
			// 5 creates × (1 + 4×1) = 25 + 35 joins × 1 pool = 35 + 10
			// routes = 70; churn: 2 changes × 5 load balancers × 1 pool
			// + 2 routes = 12; deletion: 5 cascading deletes.
			bringUp: CloudMinimum{Reads: 16, Writes: 70,
				Why: "a read per new Node; a confirming read and 1 + 4×1 writes per Service (Target.CloudCosts); per Node joining, 1×1 backend writes per load balancer created before it (Target.CloudCosts: a backend pool per port); a route-table read, a route per Node"},
			churn: CloudMinimum{Reads: 2, Writes: 12,
				Why: "a read per gone and per new instance; per Node leaving or joining, 1×1 backend writes per load balancer (Target.CloudCosts: a backend pool per port); a route created per new Node, deleted per gone one"},
			deletion: CloudMinimum{Reads: 1, Writes: 5,
				Why: "a read of the load balancers, a delete per Service (Target.CloudCosts: a backend pool per port)"},
			reason: "a listener, a pool, its members and a health monitor per port",
		},
		{
			name: "hierarchical, three ports", w: threePorts, costs: octavia,
			// 5 creates × (1 + 4×3) = 65 + 35 joins × 3 pools = 105 + 10
			// routes = 180; churn: 2 changes × 5 load balancers × 3 pools
			// + 2 routes = 32; deletion: 5 cascading deletes.
			bringUp: CloudMinimum{Reads: 16, Writes: 180,
				Why: "a read per new Node; a confirming read and 1 + 4×3 writes per Service (Target.CloudCosts); per Node joining, 3×1 backend writes per load balancer created before it (Target.CloudCosts: a backend pool per port); a route-table read, a route per Node"},
			churn: CloudMinimum{Reads: 2, Writes: 32,
				Why: "a read per gone and per new instance; per Node leaving or joining, 3×1 backend writes per load balancer (Target.CloudCosts: a backend pool per port); a route created per new Node, deleted per gone one"},
			deletion: CloudMinimum{Reads: 1, Writes: 5,
				Why: "a read of the load balancers, a delete per Service (Target.CloudCosts: a backend pool per port)"},
			reason: "a Node change writes each port's pool",
		},
		{
			name: "shared pool, two writes per change, deletes per port", w: interleaved,
			costs: CloudCosts{NodeWrites: 2, DeleteWritesPerPort: 3},
			// 5 creates + the pool's creation + 9 joins × 2 = 18 + 10
			// routes = 34; churn: 2 changes × 2 + 2 routes = 6; deletion:
			// 5 × (1 + 3×1) = 20 + the pool = 21.
			bringUp: CloudMinimum{Reads: 16, Writes: 34,
				Why: "a read per new Node; a confirming read and a create per Service; the shared backend pool created, then 2 writes to it per Node joining after it (Target.CloudCosts); a route-table read, a route per Node"},
			churn: CloudMinimum{Reads: 2, Writes: 6,
				Why: "a read per gone and per new instance; 2 writes to the shared backend pool per Node leaving or joining (Target.CloudCosts); a route created per new Node, deleted per gone one"},
			deletion: CloudMinimum{Reads: 1, Writes: 21,
				Why: "a read of the load balancers, 1 + 3×1 writes to delete each Service's load balancer and a delete of the shared backend pool (Target.CloudCosts)"},
			reason: "every cost is charged where it applies",
		},
		{
			name: "per load balancer, two writes per change, two per create and delete", w: interleaved,
			costs: CloudCosts{CreateWrites: 2, NodeWrites: 2, DeleteWrites: 2, BackendPools: BackendPoolsPerService},
			// 5 creates × 2 = 10 + 35 joins × 2 = 70 + 10 routes = 90;
			// churn: 2 changes × 5 × 2 + 2 routes = 22; deletion: 5 × 2.
			bringUp: CloudMinimum{Reads: 16, Writes: 90,
				Why: "a read per new Node; a confirming read and 2 writes per Service (Target.CloudCosts); per Node joining, 2 backend writes per load balancer created before it (Target.CloudCosts: a backend pool per Service); a route-table read, a route per Node"},
			churn: CloudMinimum{Reads: 2, Writes: 22,
				Why: "a read per gone and per new instance; per Node leaving or joining, 2 backend writes per load balancer (Target.CloudCosts: a backend pool per Service); a route created per new Node, deleted per gone one"},
			deletion: CloudMinimum{Reads: 1, Writes: 10,
				Why: "a read of the load balancers, 2 writes to delete each Service's load balancer (Target.CloudCosts: a backend pool per Service)"},
			reason: "base costs other than one write",
		},
		{
			name: "no load balancers", w: shape{nodes: 10, services: 5, ports: 1, routes: true}, costs: octavia,
			// Reads: 10 instances + the route table; writes: 10 routes;
			// churn: 2 reads, 2 route writes; nothing to delete.
			bringUp:  CloudMinimum{Reads: 11, Writes: 10, Why: "a read per new Node; a route-table read, a route per Node"},
			churn:    CloudMinimum{Reads: 2, Writes: 2, Why: "a read per gone and per new instance; a route created per new Node, deleted per gone one"},
			deletion: CloudMinimum{},
			reason:   "a provider without LoadBalancer pays none of its costs",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.costs.withDefaults()
			if diff := cmp.Diff(tc.bringUp, bringUpCloudMinimum(tc.w, c, false)); diff != "" {
				t.Errorf("bring-up: %s (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.churn, churnCloudMinimum(tc.w, c, churned, false)); diff != "" {
				t.Errorf("churn: %s (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.deletion, deletionCloudMinimum(tc.w, c)); diff != "" {
				t.Errorf("deletion: %s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRestartCloudMinimum: a restart writes nothing and reads each
// capability once, on any cloud, so its figure takes no costs.
func TestRestartCloudMinimum(t *testing.T) {
	want := CloudMinimum{Reads: 3, Why: "a read of the instances; a read of the load balancers; a read of the route table"}
	if diff := cmp.Diff(want, restartCloudMinimum(threePorts)); diff != "" {
		t.Errorf("restart (-want +got):\n%s", diff)
	}
}

// TestServicePorts: the figures above charge the simulator's Services
// for one port each.
func TestServicePorts(t *testing.T) {
	if got := servicePorts(); got != 1 || got != int64(len(newService(7).Spec.Ports)) {
		t.Errorf("servicePorts() = %d; want 1, the ports of every newService", got)
	}
}

// TestFakeCosts: FakeTarget states the fake's own costs, by its
// loadBalancers.backendPools, its route table always written whole.
func TestFakeCosts(t *testing.T) {
	tests := []struct {
		name   string
		lbs    fake.LoadBalancerSection
		want   CloudCosts
		reason string
	}{
		{name: "default", lbs: fake.LoadBalancerSection{}, want: withTable(perService), reason: "the fake's default is backends per Service"},
		{name: "per Service", lbs: fake.LoadBalancerSection{BackendPools: fake.BackendPoolsPerService}, want: withTable(perService), reason: "a backend write per load balancer per Node change"},
		{name: "shared", lbs: fake.LoadBalancerSection{BackendPools: fake.BackendPoolsShared}, want: withTable(flatShared), reason: "one pool for every load balancer: the zero value"},
		{name: "hierarchical", lbs: fake.LoadBalancerSection{Hierarchical: true}, want: withTable(octavia), reason: "four writes per port to create, a pool per port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fakeCosts(tc.lbs)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestCoalescedMinimum computes the coalesced minimums of bring-up and
// churn, worked out by hand: the same reads and creates as
// TestCloudMinimum's, but the Nodes joining at bring-up are one backend
// write per pool of each load balancer existing when the last Node
// joins (5 when interleaved, none with Nodes first), churn's two Node
// changes one write per pool, and with CloudCosts.RouteTable a scenario's
// routes one table write. Each is at most the per-change minimum.
func TestCoalescedMinimum(t *testing.T) {
	tests := []struct {
		name           string
		w              shape
		costs          CloudCosts
		bringUp, churn int64 // writes
	}{
		// 5 creates, the pool's creation, one pool write after Node 9,
		// 10 routes; churn: one pool write, a route created and one
		// deleted.
		{"zero value, interleaved", interleaved, flatShared, 5 + 1 + 1 + 10, 1 + 2},
		// The same, the routes one table write each time.
		{"zero value, route table", interleaved, withTable(flatShared), 5 + 1 + 1 + 1, 1 + 1},
		// 5 creates, a write to each of the 5 load balancers, a table
		// write; churn: a write to each, a table write.
		{"per Service, route table", interleaved, withTable(perService), 5 + 5 + 1, 5 + 1},
		// Nodes first: no load balancer exists as Nodes join.
		{"per Service, Nodes first", nodesFirst, perService, 5 + 0 + 10, 5 + 2},
		// 5 creates of 1 + 4×3 writes, a member write to each of the 15
		// pools, 10 routes; churn: a write to each pool and 2 routes.
		{"Octavia, three ports", threePorts, octavia, 5*13 + 15 + 10, 15 + 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.costs.withDefaults()
			up, perChange := bringUpCloudMinimum(tc.w, c, true), bringUpCloudMinimum(tc.w, c, false)
			if up.Reads != perChange.Reads || up.Writes != tc.bringUp || up.Writes > perChange.Writes {
				t.Errorf("bring-up: %d reads, %d writes (%s); want %d reads (the per-change minimum's), %d writes, at most the per-change %d",
					up.Reads, up.Writes, up.Why, perChange.Reads, tc.bringUp, perChange.Writes)
			}
			churn, perChange := churnCloudMinimum(tc.w, c, churned, true), churnCloudMinimum(tc.w, c, churned, false)
			if churn.Reads != perChange.Reads || churn.Writes != tc.churn || churn.Writes > perChange.Writes {
				t.Errorf("churn: %d reads, %d writes (%s); want %d reads, %d writes, at most the per-change %d",
					churn.Reads, churn.Writes, churn.Why, perChange.Reads, tc.churn, perChange.Writes)
			}
		})
	}
	want := "a read per new Node; a confirming read and a create per Service; once after the last Node joined, a backend write per load balancer created before it (Target.CloudCosts: a backend pool per Service); a route-table read, one table write with a route per Node (Target.CloudCosts: the route table written whole)"
	if got := bringUpCloudMinimum(interleaved, withTable(perService).withDefaults(), true).Why; got != want {
		t.Errorf("bring-up Why:\n got %s\nwant %s", got, want)
	}
}

// withTable is c with its route table written whole
// (CloudCosts.RouteTable).
func withTable(c CloudCosts) CloudCosts { c.RouteTable = true; return c }
