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
func (d instanceDriver) GetByID(_ context.Context, id provider.ProviderID) (instances.Instance, error) {
	d.s.mu.RLock()
	defer d.s.mu.RUnlock()
	in := d.s.instances[id.ID]
	if in == nil {
		return instances.Instance{}, fmt.Errorf("fake: instance %q: %w", id.ID, instances.ErrNotFound)
	}
	return toInstance(in), nil
}

// GetByName returns the one live instance named name, else a terminated
// one of that name, else instances.ErrNotFound. Two live instances of one
// name are an error: the cloud cannot tell which is the Node.
func (d instanceDriver) GetByName(_ context.Context, name string) (instances.Instance, error) {
	d.s.mu.RLock()
	defer d.s.mu.RUnlock()
	var live, dead *Instance
	for id := range d.s.instByName[name] {
		in := d.s.instances[id]
		switch {
		case in.State == StateTerminated:
			dead = in
		case live != nil:
			return instances.Instance{}, fmt.Errorf("fake: instances %q and %q are both named %q; expected one live instance per name", live.ID, in.ID, name)
		default:
			live = in
		}
	}
	switch {
	case live != nil:
		return toInstance(live), nil
	case dead != nil:
		return toInstance(dead), nil
	}
	return instances.Instance{}, fmt.Errorf("fake: no instance named %q: %w", name, instances.ErrNotFound)
}

// List returns every instance.
func (d instanceDriver) List(context.Context) ([]instances.Instance, error) {
	d.s.mu.RLock()
	defer d.s.mu.RUnlock()
	out := make([]instances.Instance, 0, len(d.s.instances))
	for _, in := range d.s.instances {
		out = append(out, toInstance(in))
	}
	return out, nil
}

var states = map[InstanceState]instances.State{
	StateRunning: instances.StateRunning, StateStopped: instances.StateStopped, StateTerminated: instances.StateTerminated,
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
		ID: in.ID, Name: in.Name, State: states[in.State],
		Type: in.Type, Zone: in.Zone, Region: in.Region,
		Addresses: addrs, Labels: in.Labels,
	}
}
