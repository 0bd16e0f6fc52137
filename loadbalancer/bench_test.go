package loadbalancer_test

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// benchSetup returns a Service with 10 ports, 5,000 nodes and the actual
// load balancer converged to them.
func benchSetup(b *testing.B) (*v1.Service, []*v1.Node, loadbalancer.DesiredInput, *loadbalancer.LoadBalancer) {
	b.Helper()
	svc := lbService(func(s *v1.Service) {
		s.Spec.Ports = nil
		for i := range 10 {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: v1.ProtocolTCP, Port: int32(8000 + i), NodePort: int32(30000 + i)})
		}
	})
	nodes := make([]*v1.Node, 5000)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("node-%05d", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
	}
	opts := loadbalancer.DesiredInput{Cluster: "c1"}
	actual, err := loadbalancer.Desired(svc, nodes, opts)
	if err != nil {
		b.Fatal(err)
	}
	actual.ID = "lb-1"
	return svc, nodes, opts, actual
}

func benchDesiredPlan(b *testing.B, svc *v1.Service, nodes []*v1.Node, opts loadbalancer.DesiredInput, actual *loadbalancer.LoadBalancer, wantActions int) {
	b.ReportAllocs()
	for b.Loop() {
		desired, err := loadbalancer.Desired(svc, nodes, opts)
		if err != nil {
			b.Fatal(err)
		}
		actions, err := loadbalancer.Plan(desired, actual)
		if err != nil || len(actions) != wantActions {
			b.Fatalf("Plan = %d actions, %v; want %d", len(actions), err, wantActions)
		}
	}
}

// BenchmarkDesiredPlanConverged: 10 ports, 5,000 nodes, nothing to do.
func BenchmarkDesiredPlanConverged(b *testing.B) {
	svc, nodes, opts, actual := benchSetup(b)
	benchDesiredPlan(b, svc, nodes, opts, actual, 0)
}

// BenchmarkDesiredPlanOneNodeChanged: 10 ports, 5,000 nodes, one node's
// address changed (one AddBackends action).
func BenchmarkDesiredPlanOneNodeChanged(b *testing.B) {
	svc, nodes, opts, actual := benchSetup(b)
	changed := nodes[2500].DeepCopy()
	changed.Status.Addresses[0].Address = "192.0.2.1"
	nodes = append(nodes[:2500:2500], append([]*v1.Node{changed}, nodes[2501:]...)...)
	benchDesiredPlan(b, svc, nodes, opts, actual, 1)
}
