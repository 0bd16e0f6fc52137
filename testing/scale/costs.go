package scale

import (
	"cmp"
	"fmt"
	"slices"
)

// CloudCosts is what each unit of a scenario's work costs on a provider's
// cloud, in cloud API writes: creating one load balancer, deleting one,
// and changing its backends when one Node joins or leaves, with how the
// load balancers hold their backends. The simulator computes each
// scenario's CloudMinimum from it, so that the minimum is one the
// provider can reach on its own cloud.
//
// The zero value is a flat cloud with shared backend pools: one write
// creates or deletes a load balancer whatever its ports, and every load
// balancer references one backend pool, created with the first (one
// write), written once per Node change however many Services there are,
// and deleted after the last (one write). A cloud without shared pools
// (DigitalOcean, Linode, OCI) sets BackendPools to
// BackendPoolsPerService; a hierarchical one such as OpenStack Octavia
// (a load balancer, then for each port a listener, a pool, a batch
// member write and a health monitor; one member write per pool for a
// Node change; one cascading delete) sets CreateWritesPerPort to 4 and
// BackendPools to BackendPoolsPerPort.
//
// Each figure is the cost of one change, as CloudMinimum counts: a Node
// change costs NodeWrites per pool even if another follows at once.
// ScenarioReport.CoalescedMinimum charges the changes held back and
// written together NodeWrites once per pool per batch instead (and, with
// RouteTable, one route-table write per batch).
//
// Reads are not described: on any cloud CloudMinimum counts one read
// per thing the provider must learn of (a new Node's instance, a new
// Service's absent load balancer, the list of load balancers, the route
// table).
//
// A CloudCosts is a value; Validate reports the first field out of range.
type CloudCosts struct {
	// CreateWrites is the writes that create one load balancer, whatever
	// the ports of its Service. 0 means 1; negative is an error.
	CreateWrites int
	// CreateWritesPerPort is the writes creating one load balancer adds
	// for each port of its Service (4 on Octavia: a listener, a pool, its
	// members and a health monitor). 0 means none; negative is an error.
	CreateWritesPerPort int
	// BackendPools is how the load balancers hold their backends, which
	// decides how many pools one Node change writes: BackendPoolsShared,
	// BackendPoolsPerService or BackendPoolsPerPort. Empty means
	// BackendPoolsShared; any other value is an error.
	BackendPools BackendPoolMode
	// NodeWrites is the writes to one backend pool for one Node joining
	// or leaving it. 0 means 1; negative is an error.
	NodeWrites int
	// DeleteWrites is the writes that delete one load balancer, with
	// what it holds when the cloud deletes in cascade. 0 means 1;
	// negative is an error.
	DeleteWrites int
	// DeleteWritesPerPort is the writes deleting one load balancer adds
	// for each port of its Service, on a cloud that deletes what a load
	// balancer holds one by one. 0 means none; negative is an error.
	DeleteWritesPerPort int
	// RouteTable says the cloud writes its route table whole (one write
	// sets every route, as a routes.TableDriver does), so that routes
	// changed together are one write. Only ScenarioReport.CoalescedMinimum
	// reads it: CloudMinimum charges one write per route either way. The
	// zero value is a cloud written one route at a time.
	RouteTable bool
}

// BackendPoolMode is how a cloud's load balancers hold their backends
// (CloudCosts.BackendPools).
type BackendPoolMode string

// The backend pool modes.
const (
	// BackendPoolsShared: every load balancer of the cluster references
	// one backend pool, created with the first load balancer (one write),
	// written NodeWrites times per Node change however many Services
	// there are, and deleted after the last (one write): ccmkit's
	// loadbalancer.Capabilities.SharedBackendPools, the fake's
	// loadBalancers.backendPools shared.
	BackendPoolsShared BackendPoolMode = "shared"
	// BackendPoolsPerService: each load balancer holds its own backends,
	// one pool made and deleted with it (within CreateWrites and
	// DeleteWrites), so a Node change writes NodeWrites to every load
	// balancer: DigitalOcean, Linode, OCI, the fake's default.
	BackendPoolsPerService BackendPoolMode = "perService"
	// BackendPoolsPerPort: each port of each load balancer has a pool of
	// its own, made and deleted with the port (within
	// CreateWritesPerPort and DeleteWritesPerPort), so a Node change
	// writes NodeWrites to every pool, ports × NodeWrites per load
	// balancer: OpenStack Octavia, AWS target groups.
	BackendPoolsPerPort BackendPoolMode = "perPort"
)

// backendPoolModes are the values CloudCosts.BackendPools accepts.
var backendPoolModes = []BackendPoolMode{"", BackendPoolsShared, BackendPoolsPerService, BackendPoolsPerPort}

// Validate reports the first field of c that is out of range, naming it
// (as CloudCosts.<Field>), its value and what was expected. Run calls it
// on Target.CloudCosts.
func (c *CloudCosts) Validate() error {
	counts := []struct {
		name  string
		value int
		zero  string
	}{
		{"CreateWrites", c.CreateWrites, "1"},
		{"CreateWritesPerPort", c.CreateWritesPerPort, "none"},
		{"NodeWrites", c.NodeWrites, "1"},
		{"DeleteWrites", c.DeleteWrites, "1"},
		{"DeleteWritesPerPort", c.DeleteWritesPerPort, "none"},
	}
	for _, f := range counts {
		if f.value < 0 {
			return fmt.Errorf("CloudCosts.%s %d: expected 0 (the default, %s) or more", f.name, f.value, f.zero)
		}
	}
	if !slices.Contains(backendPoolModes, c.BackendPools) {
		return fmt.Errorf("CloudCosts.BackendPools %q: expected \"\" (the default, %[2]s), %[2]q, %q or %q",
			c.BackendPools, BackendPoolsShared, BackendPoolsPerService, BackendPoolsPerPort)
	}
	return nil
}

// withDefaults fills in the defaults of c's zero fields.
func (c CloudCosts) withDefaults() CloudCosts {
	c.CreateWrites = cmp.Or(c.CreateWrites, 1)
	c.NodeWrites = cmp.Or(c.NodeWrites, 1)
	c.DeleteWrites = cmp.Or(c.DeleteWrites, 1)
	c.BackendPools = cmp.Or(c.BackendPools, BackendPoolsShared)
	return c
}

// String describes c, its defaults filled in, for a report: how many
// writes create and delete a load balancer of a Service with P ports,
// and what a Node change writes.
func (c CloudCosts) String() string {
	c = c.withDefaults()
	create := writesFormula(c.CreateWrites, c.CreateWritesPerPort, "P")
	del := writesFormula(c.DeleteWrites, c.DeleteWritesPerPort, "P")
	var pools string
	switch c.BackendPools {
	case BackendPoolsPerService:
		pools = "a backend pool per load balancer"
	case BackendPoolsPerPort:
		pools = "a backend pool per port of each load balancer"
	default:
		pools = "one backend pool shared by every load balancer"
	}
	out := fmt.Sprintf("a load balancer of P ports created in %s, deleted in %s; %s, %s to each per Node change",
		create, del, pools, plural(int64(c.NodeWrites), "write"))
	if c.RouteTable {
		out += "; the route table written whole"
	}
	return out
}

// writesFormula is base + perPort×ports writes, spelt out: "1 write",
// "2 writes", "1 + 4×P writes" (or "1 + 4×1 writes" in a Why, for the
// simulator's Services).
func writesFormula(base, perPort int, ports string) string {
	if perPort == 0 {
		return plural(int64(base), "write")
	}
	return fmt.Sprintf("%d + %d×%s writes", base, perPort, ports)
}

// plural is n and noun, with an s unless n is 1.
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// The costs of the units of work, on c with its defaults filled in.

// createWrites is the writes that create one load balancer for a Service
// with ports ports.
func (c CloudCosts) createWrites(ports int64) int64 {
	return int64(c.CreateWrites) + ports*int64(c.CreateWritesPerPort)
}

// deleteWrites is the writes that delete one load balancer of a Service
// with ports ports.
func (c CloudCosts) deleteWrites(ports int64) int64 {
	return int64(c.DeleteWrites) + ports*int64(c.DeleteWritesPerPort)
}

// nodeWrites is the backend writes one Node joining or leaving costs
// while lbs load balancers of ports ports each exist: NodeWrites to each
// pool, the one shared pool (none while no load balancer references it)
// or each load balancer's or each port's own.
func (c CloudCosts) nodeWrites(lbs, ports int64) int64 {
	w := int64(c.NodeWrites)
	switch c.BackendPools {
	case BackendPoolsPerService:
		return lbs * w
	case BackendPoolsPerPort:
		return lbs * ports * w
	}
	if lbs == 0 {
		return 0
	}
	return w
}

// shared reports whether the load balancers share one backend pool.
func (c CloudCosts) shared() bool { return c.BackendPools == BackendPoolsShared }

// flatCreate and flatDelete report whether a create and a delete are one
// write whatever the ports, and flatNodes whether a Node change is one
// write to the shared pool: the costs CloudMinimum assumed before they
// could be stated, whose Why keeps its wording.
func (c CloudCosts) flatCreate() bool { return c.CreateWrites == 1 && c.CreateWritesPerPort == 0 }
func (c CloudCosts) flatDelete() bool { return c.DeleteWrites == 1 && c.DeleteWritesPerPort == 0 }
func (c CloudCosts) flatNodes() bool  { return c.shared() && c.NodeWrites == 1 }

// perLoadBalancerWhy says what one Node change writes to each load
// balancer on a cloud without shared pools, and which costs say so, for
// a Why: "a backend write per load balancer", "(Target.CloudCosts: a
// backend pool per Service)".
func (c CloudCosts) perLoadBalancerWhy(ports int64) (writes, costs string) {
	if c.BackendPools == BackendPoolsPerPort {
		return fmt.Sprintf("%d×%d backend writes per load balancer", ports, c.NodeWrites), "(Target.CloudCosts: a backend pool per port)"
	}
	w := "a backend write"
	if c.NodeWrites != 1 {
		w = plural(int64(c.NodeWrites), "backend write")
	}
	return w + " per load balancer", "(Target.CloudCosts: a backend pool per Service)"
}
