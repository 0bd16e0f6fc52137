package scale

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/ccmkit/ccmkit/fake"
)

// fakeWrites are the fake's cloud API operations that change the cloud
// (fake/instrument.go, Op.isWrite).
var fakeWrites = []fake.Op{fake.OpApplyLoadBalancer, fake.OpDeleteLoadBalancer, fake.OpWriteRouteTable}

// FakeTarget returns a Target over c, a cloud of ccmkit's fake: instances
// are added by name through its control surface, DriverCalls reports
// c.Calls by fake.Op, and Restart builds a peer of the same cluster
// (fake.NewPeer with c's Config.ClusterID, which counts its own calls).
// c should have no instances named as the simulator's Nodes
// ("node-00000", …); AddInstance returns the fake's error for one. The
// Target's functions are safe for concurrent use.
func FakeTarget(c *fake.Cloud, clusterID string) *Target {
	ids := &instanceIDs{byName: map[string]string{}}
	return fakeTarget(c, clusterID, ids)
}

func fakeTarget(c *fake.Cloud, clusterID string, ids *instanceIDs) *Target {
	return &Target{
		Cloud: c,
		AddInstance: func(_ context.Context, name string) error {
			in, err := c.AddInstance(fake.Instance{Name: name})
			if err == nil {
				ids.put(name, in.ID)
			}
			return err
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
		Restart: func(context.Context) (*Target, error) {
			peer, err := fake.NewPeer(c, clusterID, fake.PeerOptions{})
			if err != nil {
				return nil, err
			}
			return fakeTarget(peer, clusterID, ids), nil
		},
	}
}

// fakeCalls converts the fake's counters to OpCounts.
func fakeCalls(calls fake.Calls) []OpCount {
	out := make([]OpCount, 0, len(calls.ByOp))
	for op, n := range calls.ByOp {
		out = append(out, OpCount{Operation: string(op), Write: slices.Contains(fakeWrites, op), Calls: n, Throttled: calls.ThrottledByOp[op]})
	}
	sortCounts(out)
	return out
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

func (m *instanceIDs) get(name string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byName[name]
	return id, ok
}
