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
//
// Writes may fail after they took effect (Fault.LostResponse): the call
// runs, and the fault replaces its result.

type lbAPI struct {
	m    *meter
	next lbDriver
}

func (d lbAPI) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	funcs, _, err := d.m.enter(ctx, OpFindLoadBalancers)
	if err != nil {
		return nil, err
	}
	if f := funcs.FindLoadBalancers; f != nil {
		return f(ctx, d.next, q)
	}
	return d.next.Find(ctx, q)
}

func (d lbAPI) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	funcs, late, fault := d.m.enter(ctx, OpApplyLoadBalancer)
	if fault != nil && !late {
		return nil, fault
	}
	var lb *loadbalancer.LoadBalancer
	var err error
	if f := funcs.ApplyLoadBalancer; f != nil {
		lb, err = f(ctx, d.next, a)
	} else {
		lb, err = d.next.Apply(ctx, a)
	}
	if late {
		return nil, fault
	}
	return lb, err
}

func (d lbAPI) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	funcs, late, fault := d.m.enter(ctx, OpDeleteLoadBalancer)
	if fault != nil && !late {
		return fault
	}
	var err error
	if f := funcs.DeleteLoadBalancer; f != nil {
		err = f(ctx, d.next, lb)
	} else {
		err = d.next.Delete(ctx, lb)
	}
	if late {
		return fault
	}
	return err
}

type routeAPI struct {
	m    *meter
	next routeDriver
}

func (d routeAPI) ReadTable(ctx context.Context) ([]routes.Entry, string, error) {
	funcs, _, err := d.m.enter(ctx, OpReadRouteTable)
	if err != nil {
		return nil, "", err
	}
	if f := funcs.ReadRouteTable; f != nil {
		return f(ctx, d.next)
	}
	return d.next.ReadTable(ctx)
}

func (d routeAPI) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	funcs, late, fault := d.m.enter(ctx, OpWriteRouteTable)
	if fault != nil && !late {
		return fault
	}
	var err error
	if f := funcs.WriteRouteTable; f != nil {
		err = f(ctx, d.next, revision, entries)
	} else {
		err = d.next.WriteTable(ctx, revision, entries)
	}
	if late {
		return fault
	}
	return err
}

type instanceAPI struct {
	m    *meter
	next instanceDriver
}

func (d instanceAPI) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	funcs, _, err := d.m.enter(ctx, OpGetInstance)
	if err != nil {
		return instances.Instance{}, err
	}
	if f := funcs.GetInstance; f != nil {
		return f(ctx, d.next, id)
	}
	return d.next.GetByID(ctx, id)
}

func (d instanceAPI) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	funcs, _, err := d.m.enter(ctx, OpGetInstanceByName)
	if err != nil {
		return instances.Instance{}, err
	}
	if f := funcs.GetInstanceByName; f != nil {
		return f(ctx, d.next, name)
	}
	return d.next.GetByName(ctx, name)
}

func (d instanceAPI) List(ctx context.Context) ([]instances.Instance, error) {
	funcs, _, err := d.m.enter(ctx, OpListInstances)
	if err != nil {
		return nil, err
	}
	if f := funcs.ListInstances; f != nil {
		return f(ctx, d.next)
	}
	return d.next.List(ctx)
}
