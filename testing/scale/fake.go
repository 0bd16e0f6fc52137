package scale

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// FakeTarget returns a Target over c, a cloud of ccmkit's fake built from
// cfg (fake.New's Config): instances are added through its control
// surface, DriverCalls reports c.Calls by fake.Op, LoadBalancers counts
// the load balancers tagged for cfg.ClusterID (all of them when it is
// empty), Restart builds a peer of the same cluster (fake.NewPeer with
// cfg.ClusterID, which counts its own calls), and CloudCosts are the
// fake's as cfg.LoadBalancers composes it: with backend pools per
// Service (the default), a backend write per load balancer for each Node
// change; with shared pools, the zero CloudCosts. Every second
// instance is named unlike its Node ("vm-" and the Node's name, as a VM
// whose kubelet runs with --hostname-override) and its Node registers
// with the provider ID "fake://<id>", so the simulation covers both ways
// the cloud node controller finds an instance: by the Node's name and by
// its provider ID. c should have no instances named as the simulator's
// Nodes ("node-00000", …); AddInstance returns the fake's error for one.
// The Target's functions are safe for concurrent use.
func FakeTarget(c *fake.Cloud, cfg fake.Config) *Target {
	ids := &instanceIDs{byName: map[string]string{}}
	return fakeTarget(c, cfg.ClusterID, fakeCosts(cfg.LoadBalancers), ids)
}

// fakeCosts is what each unit of work costs on the fake's cloud as lbs
// composes it: every load balancer is one ApplyLoadBalancer to create
// and one DeleteLoadBalancer to delete, whatever its ports; with shared
// pools (fake.BackendPoolsShared) they reference one pool, one
// ApplyBackendPool per Node change, the zero CloudCosts; otherwise each
// holds its backends, one ApplyLoadBalancer per load balancer per Node
// change (loadbalancer.Plan's one ActionAddBackends or
// ActionRemoveBackends). In every mode the fake's route table is written
// whole (fake.OpWriteRouteTable), RouteTable.
func fakeCosts(lbs fake.LoadBalancerSection) CloudCosts {
	switch {
	case lbs.Hierarchical: // a create is one write, then four per port (listener, pool, members, monitor); a Node change one write per pool, a pool per port
		return CloudCosts{CreateWritesPerPort: 4, BackendPools: BackendPoolsPerPort, RouteTable: true}
	case lbs.BackendPools == fake.BackendPoolsShared:
		return CloudCosts{RouteTable: true}
	default: // "" or fake.BackendPoolsPerService
		return CloudCosts{BackendPools: BackendPoolsPerService, RouteTable: true}
	}
}

func fakeTarget(c *fake.Cloud, clusterID string, costs CloudCosts, ids *instanceIDs) *Target {
	return &Target{
		Cloud:      c,
		CloudCosts: costs,
		AddInstance: func(_ context.Context, name string) (string, error) {
			renamed := ids.len()%2 == 1
			in := fake.Instance{Name: name}
			if renamed {
				in.Name = "vm-" + name
			}
			in, err := c.AddInstance(in)
			if err != nil {
				return "", err
			}
			ids.put(name, in.ID)
			if renamed {
				return "fake://" + in.ID, nil
			}
			return "", nil
		},
		TerminateInstance: func(_ context.Context, name string) error {
			id, ok := ids.get(name)
			if !ok {
				return fmt.Errorf("instance of Node %q: expected one added by AddInstance", name)
			}
			_, err := c.TerminateInstance(id)
			return err
		},
		DriverCalls: func() []OpCount { return fakeCalls(c.Calls()) },
		Backends: func(context.Context) (map[string][]string, error) {
			return fakeBackends(c.Snapshot(), clusterID, ids), nil
		},
		LoadBalancers: func(context.Context) (int, error) {
			n := 0
			for _, lb := range c.Snapshot().LoadBalancers {
				if clusterID == "" || lb.Tags[loadbalancer.TagCluster] == clusterID {
					n++
				}
			}
			return n, nil
		},
		Restart: func(context.Context) (*Target, error) {
			peer, err := fake.NewPeer(c, clusterID, fake.PeerOptions{})
			if err != nil {
				return nil, err
			}
			return fakeTarget(peer, clusterID, costs, ids), nil
		},
	}
}

// fakeBackends is the backends of the load balancers of st tagged for
// clusterID (all of them when it is empty) as Node names, by load
// balancer name: its own backends, those of the shared pool it
// references, or under listener pools each listener's pool as an entry
// "<name> <family>/<protocol>/<port>". A backend the fake keeps by provider ID only is
// named by the Node that instance was added for.
func fakeBackends(st fake.State, clusterID string, ids *instanceIDs) map[string][]string {
	pools := map[string][]loadbalancer.Backend{}
	for _, p := range st.BackendPools {
		pools[p.ID] = p.Spec.Backends
	}
	nodes := ids.nodesByProviderID()
	names := func(bs []loadbalancer.Backend) []string {
		out := make([]string, len(bs))
		for i, b := range bs {
			out[i] = b.NodeName
			if out[i] == "" {
				out[i] = nodes[b.ProviderID]
			}
		}
		return out
	}
	out := map[string][]string{}
	for _, lb := range st.LoadBalancers {
		if clusterID != "" && lb.Tags[loadbalancer.TagCluster] != clusterID {
			continue
		}
		switch {
		case lb.Spec.ListenerPools:
			for _, l := range lb.Spec.Listeners {
				var bs []loadbalancer.Backend
				if l.Pool != nil {
					bs = l.Pool.Backends
				}
				out[fmt.Sprintf("%s %s/%s/%d", lb.Name, l.Family, l.Protocol, l.Port)] = names(bs)
			}
		case lb.Spec.BackendPool != "":
			out[lb.Name] = names(append(slices.Clone(lb.Spec.Backends), pools[lb.Spec.BackendPool]...))
		default:
			out[lb.Name] = names(lb.Spec.Backends)
		}
	}
	return out
}

// fakeCalls converts the fake's counters to OpCounts.
func fakeCalls(calls fake.Calls) []OpCount {
	out := make([]OpCount, 0, len(calls.ByOp))
	for op, n := range calls.ByOp {
		out = append(out, OpCount{Capability: fakeCapability(op), Operation: string(op), Write: op.Writes(), Calls: n, Throttled: calls.ThrottledByOp[op]})
	}
	sortCounts(out)
	return out
}

// fakeCapability is the capability whose cloud API op belongs to: the
// instance and route operations by name, every other (load balancers and
// their backend pools) to the load balancers.
func fakeCapability(op fake.Op) string {
	switch {
	case strings.Contains(string(op), "Instance"):
		return capInstances
	case strings.Contains(string(op), "Route"):
		return capRoutes
	}
	return capLoadBalancer
}

// instanceIDs maps Node names to the fake's instance IDs. Safe for
// concurrent use.
type instanceIDs struct {
	mu     sync.Mutex
	byName map[string]string
}

func (m *instanceIDs) put(name, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byName[name] = id
}

func (m *instanceIDs) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byName)
}

// nodesByProviderID maps the provider ID of each instance, "fake://"
// and its ID, to the name of its Node.
func (m *instanceIDs) nodesByProviderID() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string, len(m.byName))
	for name, id := range m.byName {
		out["fake://"+id] = name
	}
	return out
}

func (m *instanceIDs) get(name string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byName[name]
	return id, ok
}
