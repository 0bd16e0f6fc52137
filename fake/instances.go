package fake

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
)

// instanceDriver is the fake's instances.ListDriver: look-ups by ID and by
// name, and a list of every instance for the instances.Cache.
type instanceDriver struct{ s *store }

var _ instances.ListDriver = instanceDriver{}

// GetByID returns the instance, a terminated one included; an unknown ID is
// instances.ErrNotFound (the cloud definitely has no such instance).
func (d instanceDriver) GetByID(ctx context.Context, id provider.ProviderID) (out instances.Instance, err error) {
	err = d.s.readCtx(ctx, func() error {
		in := d.s.instances[id.ID]
		if in == nil {
			return fmt.Errorf("fake: instance %q: %w", id.ID, instances.ErrNotFound)
		}
		out = toInstance(in)
		return nil
	})
	return out, err
}

// GetByName returns the one live instance named name, else a terminated
// one of that name, else instances.ErrNotFound. Two live instances of one
// name are an error: the cloud cannot tell which is the Node.
func (d instanceDriver) GetByName(ctx context.Context, name string) (out instances.Instance, err error) {
	err = d.s.readCtx(ctx, func() error {
		var live, dead *Instance
		for id := range d.s.instByName[name] {
			in := d.s.instances[id]
			switch {
			case in.State == instances.StateTerminated:
				dead = in
			case live != nil:
				return fmt.Errorf("fake: instances %q and %q are both named %q: expected one live instance per name", live.ID, in.ID, name)
			default:
				live = in
			}
		}
		switch {
		case live != nil:
			out = toInstance(live)
		case dead != nil:
			out = toInstance(dead)
		default:
			return fmt.Errorf("fake: no instance named %q: %w", name, instances.ErrNotFound)
		}
		return nil
	})
	return out, err
}

// List returns every instance.
func (d instanceDriver) List(ctx context.Context) (out []instances.Instance, err error) {
	err = d.s.readCtx(ctx, func() error {
		out = make([]instances.Instance, 0, len(d.s.instances))
		for _, in := range d.s.instances {
			out = append(out, toInstance(in))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// freshLookups is the instances.Driver in front of the instances.Cache when
// the state is shared through a file: before each look-up it brings the
// state up to date, which drops the cache when another process changed an
// instance, so such a change is seen at the next look-up as a change made
// through this Cloud's control surface is. It makes no cloud API call.
type freshLookups struct {
	s    *store
	next instances.Driver
}

func (d freshLookups) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	if err := d.s.sync(ctx); err != nil {
		return instances.Instance{}, err
	}
	return d.next.GetByID(ctx, id)
}

func (d freshLookups) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	if err := d.s.sync(ctx); err != nil {
		return instances.Instance{}, err
	}
	return d.next.GetByName(ctx, name)
}

// toInstance maps a stored instance to the adapter's model. Stored
// instances are never mutated, so their slices and maps can be shared.
func toInstance(in *Instance) instances.Instance {
	addrs := make([]v1.NodeAddress, 0, len(in.InternalIPs)+len(in.ExternalIPs)+1)
	for _, ip := range in.InternalIPs {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	for _, ip := range in.ExternalIPs {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeExternalIP, Address: ip})
	}
	if in.Hostname != "" {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeHostName, Address: in.Hostname})
	}
	return instances.Instance{
		ID: in.ID, Name: in.Name, State: in.State,
		Type: in.Type, Zone: in.Zone, Region: in.Region,
		Addresses: addrs, Labels: in.Labels,
	}
}

// instanceAPI is cloudAPI as an instances.ListDriver: its List is the
// instances', where cloudAPI's is the load balancers'. Its calls go through
// the same gate.
type instanceAPI cloudAPI

func (a instanceAPI) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	return gate(ctx, cloudAPI(a), OpGetInstance, func(f *Funcs, next cloudAPI) (instances.Instance, error) {
		if f == nil || f.GetInstance == nil {
			return instanceDriver{a.s}.GetByID(ctx, id)
		}
		return f.GetInstance(ctx, instanceAPI(next), id)
	})
}

func (a instanceAPI) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	return gate(ctx, cloudAPI(a), OpGetInstanceByName, func(f *Funcs, next cloudAPI) (instances.Instance, error) {
		if f == nil || f.GetInstanceByName == nil {
			return instanceDriver{a.s}.GetByName(ctx, name)
		}
		return f.GetInstanceByName(ctx, instanceAPI(next), name)
	})
}

func (a instanceAPI) List(ctx context.Context) ([]instances.Instance, error) {
	return gate(ctx, cloudAPI(a), OpListInstances, func(f *Funcs, next cloudAPI) ([]instances.Instance, error) {
		if f == nil || f.ListInstances == nil {
			return instanceDriver{a.s}.List(ctx)
		}
		return f.ListInstances(ctx, instanceAPI(next))
	})
}
