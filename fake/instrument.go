package fake

import (
	"context"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// The fake's cloud API: each driver wrapped so that every call is counted,
// may fail with an injected fault, and goes through the interceptor Funcs.
// This is where a real provider has its cloud client.

type lbAPI struct {
	m    *meter
	next lbDriver
}

func (d lbAPI) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	if _, err := d.m.enter(ctx, OpFindLoadBalancers); err != nil {
		return nil, err
	}
	if f := d.m.interceptors().FindLoadBalancers; f != nil {
		return f(ctx, d.next, q)
	}
	return d.next.Find(ctx, q)
}

// Writes may fail after they took effect (Fault.LostResponse): the call
// runs, and the fault replaces its result.

func (d lbAPI) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	late, fault := d.m.enter(ctx, OpApplyLoadBalancer)
	if fault != nil && !late {
		return nil, fault
	}
	lb, err := d.apply(ctx, a)
	if late {
		return nil, fault
	}
	return lb, err
}

func (d lbAPI) apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	if f := d.m.interceptors().ApplyLoadBalancer; f != nil {
		return f(ctx, d.next, a)
	}
	return d.next.Apply(ctx, a)
}

func (d lbAPI) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	late, fault := d.m.enter(ctx, OpDeleteLoadBalancer)
	if fault != nil && !late {
		return fault
	}
	err := d.delete(ctx, lb)
	if late {
		return fault
	}
	return err
}

func (d lbAPI) delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	if f := d.m.interceptors().DeleteLoadBalancer; f != nil {
		return f(ctx, d.next, lb)
	}
	return d.next.Delete(ctx, lb)
}

type routeAPI struct {
	m    *meter
	next routeDriver
}

func (d routeAPI) ReadTable(ctx context.Context) ([]routes.Entry, string, error) {
	if _, err := d.m.enter(ctx, OpReadRouteTable); err != nil {
		return nil, "", err
	}
	if f := d.m.interceptors().ReadRouteTable; f != nil {
		return f(ctx, d.next)
	}
	return d.next.ReadTable(ctx)
}

func (d routeAPI) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	late, fault := d.m.enter(ctx, OpWriteRouteTable)
	if fault != nil && !late {
		return fault
	}
	err := d.write(ctx, revision, entries)
	if late {
		return fault
	}
	return err
}

func (d routeAPI) write(ctx context.Context, revision string, entries []routes.Entry) error {
	if f := d.m.interceptors().WriteRouteTable; f != nil {
		return f(ctx, d.next, revision, entries)
	}
	return d.next.WriteTable(ctx, revision, entries)
}

type instanceAPI struct {
	m    *meter
	next instanceDriver
}

func (d instanceAPI) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	if _, err := d.m.enter(ctx, OpGetInstance); err != nil {
		return instances.Instance{}, err
	}
	if f := d.m.interceptors().GetInstance; f != nil {
		return f(ctx, d.next, id)
	}
	return d.next.GetByID(ctx, id)
}

func (d instanceAPI) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	if _, err := d.m.enter(ctx, OpGetInstanceByName); err != nil {
		return instances.Instance{}, err
	}
	if f := d.m.interceptors().GetInstanceByName; f != nil {
		return f(ctx, d.next, name)
	}
	return d.next.GetByName(ctx, name)
}

func (d instanceAPI) List(ctx context.Context) ([]instances.Instance, error) {
	if _, err := d.m.enter(ctx, OpListInstances); err != nil {
		return nil, err
	}
	if f := d.m.interceptors().ListInstances; f != nil {
		return f(ctx, d.next)
	}
	return d.next.List(ctx)
}
