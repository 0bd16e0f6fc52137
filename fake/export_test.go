package fake

import (
	"context"
	"net/netip"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// This file gives the tests of package fake_test the helpers they share
// with the package's internal tests, so that each is written once.

// LBRetryAfter is the default of loadbalancer.Options.RetryAfter, the
// longest a provisioning load balancer makes the service controller wait.
const LBRetryAfter = lbRetryAfter

// Unexported API the tests of package fake_test check.
var (
	ErrInstanceNotFound   = errInstanceNotFound
	ErrInstanceExists     = errInstanceExists
	ErrInstanceTerminated = errInstanceTerminated
	ErrInvalidInstance    = errInvalidInstance
	ErrInvalidBackend     = errInvalidBackend
	ErrPoolExhausted      = errPoolExhausted
	ErrThrottled          = errThrottled

	AllLoadBalancerCapabilities = allLoadBalancerCapabilities
	Ops                         = ops
)

// The defaults the field docs state.
const (
	DefaultInstanceCIDR        = defaultInstanceCIDR
	DefaultIPv4Pool            = defaultIPv4Pool
	DefaultIPv6Pool            = defaultIPv6Pool
	DefaultZone                = defaultZone
	DefaultRegion              = defaultRegion
	DefaultInstanceType        = defaultInstanceType
	RealisticProvisioningDelay = realisticProvisioningDelay
	RealisticReadsPerSecond    = realisticReadsPerSecond
	RealisticWritesPerSecond   = realisticWritesPerSecond
	RealisticBurst             = realisticBurst
	RealisticBackends          = realisticBackends
)

// RouteStats returns the route table's batching counters.
func RouteStats(c *Cloud) routes.Stats { return c.routes.Stats() }

// CmpModel lets go-cmp compare what holds the loadbalancer model
// (State, LoadBalancer): its addresses and CIDRs are net/netip values.
var CmpModel = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

// Failing returns interceptor Funcs that fail calls: before each call, take
// decides whether the call of op fails, with which error, and whether the
// error comes only after the call took effect (late: a lost response; for
// writes only, a read fails at once).
func Failing(take func(op Op) (err error, late bool)) Funcs {
	// run is one call of op: call unless the fault comes first.
	run := func(op Op, call func() error) error {
		fault, late := take(op)
		if fault == nil {
			return call()
		}
		if late && op.Writes() {
			_ = call()
		}
		return fault
	}
	f := Funcs{
		FindLoadBalancers: func(ctx context.Context, next loadbalancer.Driver, q loadbalancer.Query) (out []*loadbalancer.LoadBalancer, err error) {
			err = run(OpFindLoadBalancers, func() (err error) { out, err = next.Find(ctx, q); return err })
			return nilOnError(out, err)
		},
		ListLoadBalancers: func(ctx context.Context, next loadbalancer.ListDriver) (out []*loadbalancer.LoadBalancer, err error) {
			err = run(OpListLoadBalancers, func() (err error) { out, err = next.List(ctx); return err })
			return nilOnError(out, err)
		},
		ApplyLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (out *loadbalancer.LoadBalancer, err error) {
			err = run(OpApplyLoadBalancer, func() (err error) { out, err = next.Apply(ctx, a); return err })
			if appliedBusy(err) {
				return out, err // applied: the result stands
			}
			return nilOnError(out, err)
		},
		DeleteLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, lb *loadbalancer.LoadBalancer) error {
			return run(OpDeleteLoadBalancer, func() error { return next.Delete(ctx, lb) })
		},
		ReadRouteTable: func(ctx context.Context, next routes.TableDriver) (out []routes.Entry, rev string, err error) {
			err = run(OpReadRouteTable, func() (err error) { out, rev, err = next.ReadTable(ctx); return err })
			if err != nil {
				return nil, "", err
			}
			return out, rev, nil
		},
		WriteRouteTable: func(ctx context.Context, next routes.TableDriver, revision string, entries []routes.Entry) error {
			return run(OpWriteRouteTable, func() error { return next.WriteTable(ctx, revision, entries) })
		},
		GetInstance: func(ctx context.Context, next instances.ListDriver, id provider.ProviderID) (out instances.Instance, err error) {
			err = run(OpGetInstance, func() (err error) { out, err = next.GetByID(ctx, id); return err })
			return nilOnError(out, err)
		},
		GetInstanceByName: func(ctx context.Context, next instances.ListDriver, name string) (out instances.Instance, err error) {
			err = run(OpGetInstanceByName, func() (err error) { out, err = next.GetByName(ctx, name); return err })
			return nilOnError(out, err)
		},
		ListInstances: func(ctx context.Context, next instances.ListDriver) (out []instances.Instance, err error) {
			err = run(OpListInstances, func() (err error) { out, err = next.List(ctx); return err })
			return nilOnError(out, err)
		},
	}
	failingPools(&f, run)
	return f
}

// failingPools sets the backend pool operations of f to fail as run, the
// one call of an operation in Failing, decides.
func failingPools(f *Funcs, run func(op Op, call func() error) error) {
	f.FindBackendPools = func(ctx context.Context, next loadbalancer.PoolDriver, q loadbalancer.PoolQuery) (out []*loadbalancer.Pool, err error) {
		err = run(OpFindBackendPools, func() (err error) { out, err = next.FindPools(ctx, q); return err })
		return nilOnError(out, err)
	}
	f.ListBackendPools = func(ctx context.Context, next loadbalancer.PoolListDriver) (out []*loadbalancer.Pool, err error) {
		err = run(OpListBackendPools, func() (err error) { out, err = next.ListPools(ctx); return err })
		return nilOnError(out, err)
	}
	f.ApplyBackendPool = func(ctx context.Context, next loadbalancer.PoolDriver, a loadbalancer.PoolAction) (out *loadbalancer.Pool, err error) {
		err = run(OpApplyBackendPool, func() (err error) { out, err = next.ApplyPool(ctx, a); return err })
		return nilOnError(out, err)
	}
	f.DeleteBackendPool = func(ctx context.Context, next loadbalancer.PoolDriver, p *loadbalancer.Pool) error {
		return run(OpDeleteBackendPool, func() error { return next.DeletePool(ctx, p) })
	}
}

// nilOnError returns the zero T with a non-nil err, else v.
func nilOnError[T any](v T, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}
