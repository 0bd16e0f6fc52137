package loadbalancer_test

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// TestDeadTargetsInNewListenerPool: under Capabilities.ListenerPools, a
// new listener's pool (ActionAddListenerPool, whose Pool a Driver may
// create with its members) never carries a Node whose instance is gone,
// whatever the BackendKey; nor does any other write.
func TestDeadTargetsInNewListenerPool(t *testing.T) {
	for _, key := range []loadbalancer.BackendKey{loadbalancer.BackendKeyNodeName, loadbalancer.BackendKeyProviderID, loadbalancer.BackendKeyAddress} {
		t.Run(fmt.Sprintf("key=%q", key), func(t *testing.T) {
			alive := threeNodes()
			book := &instanceBook{addrs: map[string][]v1.NodeAddress{}}
			for _, n := range alive {
				book.addrs[n.Spec.ProviderID] = n.Status.Addresses
			}
			gone := node("gone", "10.0.0.9") // an InternalIP, no instance
			caps := withKey(key)
			caps.ListenerPools = true
			var log skipLog
			r, d := newReconciler(t, loadbalancer.Options{Instances: book, Capabilities: caps, Hooks: loadbalancer.Hooks{NodeSkipped: log.hook}})
			var sent []string
			var poolActions int
			d.onApply = func(a loadbalancer.Action) error {
				bs := slices.Clone(a.Backends)
				switch a.Kind {
				case loadbalancer.ActionCreate:
					bs = append(bs, a.Create.Spec.Backends...)
					for _, l := range a.Create.Spec.Listeners {
						if l.Pool != nil {
							bs = append(bs, l.Pool.Backends...)
						}
					}
				case loadbalancer.ActionAddListenerPool:
					poolActions++
					bs = append(bs, a.Pool.Backends...)
				}
				for _, b := range bs {
					sent = append(sent, b.NodeName)
				}
				return nil
			}
			mustEnsure(t, r, "c1", lbService(), alive)
			two := lbService(func(s *v1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
			})
			mustEnsure(t, r, "c1", two, append(slices.Clone(alive), gone))
			if poolActions == 0 {
				t.Fatal("no ActionAddListenerPool was applied: the test does not reach the case")
			}
			if slices.Contains(sent, "gone") {
				t.Errorf("backends sent %v include gone, whose instance does not exist", sent)
			}
			if got := log.take(); !slices.Equal(got, []string{"gone"}) {
				t.Errorf("reported %v; want [gone] once", got)
			}
		})
	}
}
