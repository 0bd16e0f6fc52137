package scale

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/clip"
)

// Target is the provider a simulation runs against, and the few things the
// simulator needs to do to its cloud behind the provider's back.
type Target struct {
	// Cloud is the provider, as its factory returns it; required. The
	// simulator calls its Initialize once, with a nil client builder, as
	// the cloud-controller-manager does before its controllers start. It
	// must offer InstancesV2; the controllers see only its LoadBalancer,
	// InstancesV2 and Routes, through the simulator's meter.
	Cloud cloudprovider.Interface
	// AddInstance creates a running instance for the Node name; required.
	// It returns the provider ID the Node registers with, as a kubelet
	// started with --provider-id does, for an instance the provider cannot
	// find by the Node's name (a VM named unlike its Node); or "" for a
	// Node that registers without one, which the cloud node controller
	// then looks up by name. The simulator then creates the Node.
	AddInstance func(ctx context.Context, name string) (providerID string, err error)
	// TerminateInstance terminates the instance of Node name for good,
	// after which the provider reports it gone. Nil: the node churn
	// scenario is skipped.
	TerminateInstance func(ctx context.Context, name string) error
	// DriverCalls, if set, returns the calls the provider made to its
	// cloud API since Cloud was built, by operation (for ccmkit's fake,
	// fake.Cloud.Calls().ByOp), and which operations write. The simulator
	// reports them next to the interface-boundary counts.
	DriverCalls func() []OpCount
	// Restart, if set, returns a new Target over the same cloud: the
	// provider a restarted cloud-controller-manager builds (new caches,
	// new API client). Nil: the restart scenario runs new controllers
	// over the same Cloud.
	Restart func(ctx context.Context) (*Target, error)
	// LoadBalancers, if set, returns how many load balancers the cloud
	// holds for the cluster (however the provider tells its own from
	// others'). The simulator then checks, after bring-up and after
	// restart, that there is exactly one per Service (no duplicate from a
	// retried or concurrent create, none missing) and, after deletion,
	// that there is none (none leaked); otherwise Run returns an error
	// wrapping ErrLoadBalancerCount. Nil: not checked.
	LoadBalancers func(ctx context.Context) (int, error)
	// Backends, if set, returns the backends of each load balancer the
	// cloud holds for the cluster, as the names of their Nodes, by load
	// balancer (under any name the provider likes: the simulator names it
	// in an error only). On a cloud that keeps backends per port, each
	// port's pool is an entry of its own. The goals of bring-up and churn
	// then also need every entry to be exactly the live Nodes, so that a
	// provider that holds backend changes back
	// (loadbalancer.Options.CoalesceWindow) is measured until its last
	// write, and one that loses a change does not converge. Nil: not
	// checked.
	Backends func(ctx context.Context) (map[string][]string, error)
	// CloudCosts is what each unit of work costs on the provider's
	// cloud: the writes that create and delete one load balancer, and
	// those of one Node joining or leaving. Every scenario's CloudMinimum
	// is computed from it, and says which costs it used. The zero value
	// is a flat cloud whose load balancers share one backend pool; a
	// cloud without shared pools, or a hierarchical one, states its own,
	// or the minimum is not one the provider can reach. Run returns an
	// error for an invalid one (CloudCosts.Validate).
	CloudCosts CloudCosts
}

// Config describes one simulation. The zero value of each field but the
// sizes is a documented default.
type Config struct {
	// Nodes is how many Nodes join at bring-up; at least 1, at most 8192
	// (the churn's new Nodes need pod CIDRs too).
	Nodes int
	// Services is how many LoadBalancer Services are created at bring-up;
	// 0 means none; at most 16384.
	Services int
	// ChurnPercent is the percentage of the Nodes the churn scenario
	// replaces, rounded up. 0 means 10; negative is an error.
	ChurnPercent int
	// Spread is the wall time over which Nodes join and Services are
	// created at bring-up. 0 means 1s; negative means all at once.
	Spread time.Duration
	// NodesFirst makes bring-up create the Services only after every Node
	// has joined and been initialized, instead of interleaving them. It
	// avoids a data race of the upstream service controller
	// (k8s.io/cloud-provider@v0.37.2 controllers/service/controller.go:
	// processServiceCreateOrUpdate writes cachedService.state outside the
	// cache lock while the node worker's syncNodes reads it through
	// serviceCache.allServices), which the race detector reports in tests
	// built with -race. False: interleaved, as in a real cluster.
	NodesFirst bool
	// Skip names scenarios not to run (BringUp cannot be skipped, and
	// another name is an error); each is
	// reported as skipped. The restart scenario starts the service
	// controller over existing Nodes and Services, so its node and
	// service workers run at once and the upstream data race NodesFirst
	// describes happens whatever the order: a test built with -race skips
	// it. Nil: none.
	Skip []string
	// Compression divides the upstream default periods: the route
	// controller's 10s (--route-reconciliation-period), the cloud node
	// controller's status update, 5m (--node-status-update-frequency),
	// and the node-lifecycle controller's 5s monitor period. The service
	// controller's node sync period (100s, a constant of
	// controllers/service/controller.go) cannot be set and is not
	// compressed. The steady state lasts Steady, compressed. 0 means 100;
	// negative is an error.
	Compression int
	// RoutePeriod is the route controller's --route-reconciliation-period
	// and NodeMonitorPeriod the node-lifecycle controller's
	// --node-monitor-period, as a cluster would set them; the simulator
	// divides them by Compression. 0 means the upstream defaults, 10s and
	// 5s; negative is an error.
	RoutePeriod, NodeMonitorPeriod time.Duration
	// DriftRepairPeriod, when positive, also runs ccmkit's drift-repair
	// controller (package housekeeping, the example CCM's
	// --drift-repair-period) with this period, divided by Compression, so
	// that its cloud calls are counted with the upstream controllers'
	// (its calls at the interface boundary as RepairLoadBalancer). A
	// provider whose LoadBalancer is not a housekeeping.Repairer runs
	// without it. 0 means off: the upstream controllers only; negative is
	// an error.
	DriftRepairPeriod time.Duration
	// Steady is the simulated time the steady scenario lasts, compressed
	// like the periods (an hour at the default Compression is 36s of wall
	// time). 0 means one hour; negative is an error.
	Steady time.Duration
	// Timeout bounds each scenario's wait for convergence. 0 means 2m;
	// negative is an error.
	Timeout time.Duration
	// ClusterName is the --cluster-name the controllers pass. Empty
	// means "kubernetes", the upstream default; a space or a control
	// character is an error.
	ClusterName string
}

// maxServices is how many Services one simulation can create.
const maxServices = 1 << 14

// skippable are the scenarios Config.Skip may name.
var skippable = []string{Steady, Churn, Restart, Deletion}

// Validate reports the first field of c that is out of range, naming it,
// its value and what was expected.
func (c *Config) Validate() error {
	clusterErr := check.ClusterName("Config.ClusterName", c.ClusterName)
	switch {
	case c.Nodes < 1:
		return fmt.Errorf("Config.Nodes %d: expected at least 1", c.Nodes)
	case c.Services < 0:
		return fmt.Errorf("Config.Services %d: expected 0 or more", c.Services)
	case c.ChurnPercent < 0 || c.ChurnPercent > 100:
		return fmt.Errorf("Config.ChurnPercent %d: expected 0 (the default, 10) to 100", c.ChurnPercent)
	case c.Compression < 0:
		return fmt.Errorf("Config.Compression %d: expected 0 (the default, 100) or more", c.Compression)
	case c.Nodes > maxNodes/2:
		return fmt.Errorf("Config.Nodes %d: expected at most %d (a /24 pod CIDR per Node in %s, with room for the churn's)", c.Nodes, maxNodes/2, clusterCIDR)
	case c.Services > maxServices:
		return fmt.Errorf("Config.Services %d: expected at most %d", c.Services, maxServices)
	case slices.Contains(c.Skip, BringUp):
		return fmt.Errorf("Config.Skip %q: expected only %s, %s, %s or %s (every scenario needs the bring-up)", c.Skip, Steady, Churn, Restart, Deletion)
	case slices.ContainsFunc(c.Skip, func(name string) bool { return !slices.Contains(skippable, name) }):
		i := slices.IndexFunc(c.Skip, func(name string) bool { return !slices.Contains(skippable, name) })
		return fmt.Errorf("Config.Skip[%d] %q: expected %s, %s, %s or %s", i, clip.Quoted(c.Skip[i]), Steady, Churn, Restart, Deletion)
	case clusterErr != nil:
		return clusterErr
	case c.RoutePeriod < 0:
		return fmt.Errorf("Config.RoutePeriod %v: expected 0 (the default, 10s) or more", c.RoutePeriod)
	case c.NodeMonitorPeriod < 0:
		return fmt.Errorf("Config.NodeMonitorPeriod %v: expected 0 (the default, 5s) or more", c.NodeMonitorPeriod)
	case c.DriftRepairPeriod < 0:
		return fmt.Errorf("Config.DriftRepairPeriod %v: expected 0 (off) or more", c.DriftRepairPeriod)
	case c.Steady < 0:
		return fmt.Errorf("Config.Steady %v: expected 0 (the default, 1h) or more", c.Steady)
	case c.Timeout < 0:
		return fmt.Errorf("Config.Timeout %v: expected 0 (the default, 2m) or more", c.Timeout)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.ChurnPercent == 0 {
		c.ChurnPercent = 10
	}
	if c.Spread == 0 {
		c.Spread = time.Second
	}
	if c.Spread < 0 {
		c.Spread = 0
	}
	if c.Compression == 0 {
		c.Compression = 100
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.Steady == 0 {
		c.Steady = time.Hour
	}
	if c.ClusterName == "" {
		c.ClusterName = "kubernetes"
	}
	c.RoutePeriod = cmp.Or(c.RoutePeriod, 10*time.Second)
	c.NodeMonitorPeriod = cmp.Or(c.NodeMonitorPeriod, 5*time.Second)
	return c
}

// periods are the compressed periods of the controllers.
type periods struct{ route, nodeStatus, nodeMonitor, drift time.Duration }

// periods returns c's periods divided by Compression; c has its defaults
// (withDefaults).
func (c Config) periods() periods {
	f := time.Duration(c.Compression)
	return periods{route: c.RoutePeriod / f, nodeStatus: 5 * time.Minute / f, nodeMonitor: c.NodeMonitorPeriod / f, drift: c.DriftRepairPeriod / f}
}

// Report is what one simulation measured, one ScenarioReport per scenario
// in the order they ran.
type Report struct {
	// Nodes and Services are Config.Nodes and Config.Services.
	Nodes, Services int
	// CloudCosts are the costs every scenario's CloudMinimum was computed
	// with: Target.CloudCosts, its defaults filled in.
	CloudCosts CloudCosts
	// Scenarios are the scenarios that ran or were skipped.
	Scenarios []ScenarioReport
}

// Scenario returns the report of the scenario named name, or false.
func (r *Report) Scenario(name string) (ScenarioReport, bool) {
	i := slices.IndexFunc(r.Scenarios, func(s ScenarioReport) bool { return s.Name == name })
	if i < 0 {
		return ScenarioReport{}, false
	}
	return r.Scenarios[i], true
}

// The scenarios, in the order Run runs them over one cluster.
const (
	BringUp  = "bring-up"
	Steady   = "steady"
	Churn    = "churn"
	Restart  = "restart"
	Deletion = "deletion"
)

// ScenarioReport is one scenario's figures.
type ScenarioReport struct {
	// Name is one of BringUp, Steady, Churn, Restart, Deletion.
	Name string
	// Skipped, if not empty, says why the scenario did not run; the other
	// fields are then zero.
	Skipped string
	// Converged is the wall time from the scenario's start until the
	// cluster reached its goal (see Run); for Steady, the time it ran.
	Converged time.Duration
	// Calls are the calls the controllers made at the
	// cloudprovider.Interface boundary during the scenario, including
	// the settling time after convergence, sorted by capability and
	// operation.
	Calls []OpCount
	// Driver are the Driver-boundary calls (Target.DriverCalls) during
	// the scenario, sorted by operation; nil without Target.DriverCalls.
	Driver []OpCount
	// Minimum are the fewest calls of each operation any provider needs
	// for the scenario at the interface boundary, each with how it is
	// derived. Operations not listed have a minimum of 0.
	Minimum []Minimum
	// CloudMinimum is the fewest cloud API calls (the Driver boundary)
	// the scenario needs; compare it with Sum(Driver).
	CloudMinimum CloudMinimum
	// CoalescedMinimum is CloudMinimum for a provider that holds changes
	// back and writes them together (loadbalancer.Options.CoalesceWindow,
	// routes.Table): the Nodes joining at bring-up are one backend write
	// per pool of each load balancer created before the last of them,
	// churn's Nodes leaving and joining one write per pool, and with
	// CloudCosts.RouteTable the routes of a scenario one table write. It
	// assumes each load balancer exists as soon as its Service does: a
	// provider whose creates lag behind the Nodes joining can go below it
	// (measured: 28 writes against 31 on the realistic hierarchical fake). It equals CloudMinimum for the scenarios
	// where nothing can be held back (steady, restart, deletion).
	CoalescedMinimum CloudMinimum
}

// CloudMinimum is the fewest cloud API calls a scenario needs, counted as
// Sum counts them: of a provider that makes one call per cloud object it
// must create, change, delete or learn of, as each change comes (it
// cannot know another is about to follow), each write costing what
// Target.CloudCosts says it costs on the provider's cloud. With the zero
// CloudCosts the load balancers share one backend pool, so that one Node
// joining or leaving is one backend write however many Services there
// are; a cloud without shared pools pays one backend write per load
// balancer (per pool, on a hierarchical cloud) for the same change, and
// must say so for the figure to be a floor that provider can reach. A
// provider can go below it only by holding changes back to batch them
// (ccmkit's whole-table routes.Table does, one table write per batch),
// as the upstream service controller in effect does: each node sync
// brings every load balancer to the Nodes as they are then, however many
// changed since the last (controllers/service/controller.go syncNodes).
type CloudMinimum struct {
	Reads, Writes int64
	// Why says how the figures are derived, and which of
	// Target.CloudCosts they used where those are not the zero value's.
	Why string
}

// Total is Reads plus Writes.
func (c CloudMinimum) Total() int64 { return c.Reads + c.Writes }

// Minimum is the fewest calls of one interface operation a scenario needs.
type Minimum struct {
	Capability, Operation string
	Calls                 int64
	// Why says how the figure is derived.
	Why string
}

// Count returns the calls of operation in counts (Calls, failed ones
// included), 0 if absent.
func Count(counts []OpCount, operation string) int64 {
	for _, c := range counts {
		if c.Operation == operation {
			return c.Calls
		}
	}
	return 0
}

// Totals are the calls of a scenario summed over its operations.
type Totals struct {
	// Reads are the calls of operations that only read the cloud;
	// Writes, those of operations that may change it (OpCount.Write).
	Reads, Writes int64
	// Throttled are the calls of either kind that were throttled.
	Throttled int64
}

// Sum returns the Totals of counts (ScenarioReport.Calls or .Driver).
func Sum(counts []OpCount) Totals {
	var t Totals
	for _, c := range counts {
		t.count(c)
	}
	return t
}

// count adds the calls of c to t.
func (t *Totals) count(c OpCount) {
	if c.Write {
		t.Writes += c.Calls
	} else {
		t.Reads += c.Calls
	}
	t.Throttled += c.Throttled
}

// ByCapability returns the Totals of counts per OpCount.Capability.
func ByCapability(counts []OpCount) map[string]Totals {
	out := map[string]Totals{}
	for _, c := range counts {
		t := out[c.Capability]
		t.count(c)
		out[c.Capability] = t
	}
	return out
}

// ErrNotConverged is wrapped by Run's error when a scenario did not reach
// its goal within Config.Timeout.
var ErrNotConverged = errors.New("not converged")

// ErrLoadBalancerCount is wrapped by Run's error when Target.LoadBalancers
// reports other than one load balancer per Service after bring-up or
// restart (a duplicate or a missing one), or any after deletion (a leak).
var ErrLoadBalancerCount = errors.New("wrong number of load balancers")

func sortCounts(c []OpCount) {
	slices.SortFunc(c, func(a, b OpCount) int {
		return cmp.Or(cmp.Compare(a.Capability, b.Capability), cmp.Compare(a.Operation, b.Operation))
	})
}

// diff returns after minus before, per operation, leaving out operations
// not called in between.
func diff(before, after []OpCount) []OpCount {
	var out []OpCount
	for _, a := range after {
		i := slices.IndexFunc(before, func(b OpCount) bool {
			return b.Capability == a.Capability && b.Operation == a.Operation
		})
		if i >= 0 {
			a.Calls -= before[i].Calls
			a.Throttled -= before[i].Throttled
			a.Errors -= before[i].Errors
			a.NotFound -= before[i].NotFound
		}
		if a.Calls > 0 {
			out = append(out, a)
		}
	}
	return out
}
