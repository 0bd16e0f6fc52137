package housekeeping

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/fake"
)

// testCluster is the --cluster-name of the tests; the fake's ClusterID
// is testClusterID, the identity its load balancers are tagged with.
const (
	testCluster   = "kubernetes"
	testClusterID = "cluster-a"
)

// env is a cluster and a fake cloud for the controllers: a client-go fake
// clientset, informers whose indexers the tests fill directly (nothing is
// started, so a pass sees exactly what a test put there), and a fake
// clock.
type env struct {
	t     *testing.T
	cloud *fake.Cloud
	lb    cloudprovider.LoadBalancer
	// repairer is what the DriftRepair of newDrift runs over: lb, unless
	// a test wraps it.
	repairer Repairer
	client   *k8sfake.Clientset
	factory  informers.SharedInformerFactory
	clock    *testingclock.FakeClock
	nodes    []*v1.Node
}

// newEnv returns an env over a fake cloud with ClusterID testClusterID
// and n instances, each with its registered Node.
func newEnv(t *testing.T, n int) *env {
	t.Helper()
	var ins []fake.Instance
	for i := range n {
		ins = append(ins, fake.Instance{Name: fmt.Sprintf("node-%d", i)})
	}
	cloud, err := fake.New(fake.Config{ClusterID: testClusterID}, fake.Options{Instances: ins})
	if err != nil {
		t.Fatal(err)
	}
	lb, _ := cloud.LoadBalancer()
	client := k8sfake.NewClientset()
	e := &env{t: t, cloud: cloud, lb: lb, repairer: lb.(Repairer), client: client, factory: informers.NewSharedInformerFactory(client, 0),
		clock: testingclock.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))}
	for i := range n {
		node, err := cloud.NodeFor(fmt.Sprintf("i-%d", i+1))
		if err != nil {
			t.Fatal(err)
		}
		e.add(node)
		e.nodes = append(e.nodes, node)
	}
	return e
}

// add puts obj (a *v1.Service or *v1.Node) in the clientset and in its
// informer's indexer.
func (e *env) add(obj any) {
	e.t.Helper()
	ctx := e.t.Context()
	var err error
	switch o := obj.(type) {
	case *v1.Service:
		_, err = e.client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		if err == nil {
			err = e.factory.Core().V1().Services().Informer().GetIndexer().Add(o)
		}
	case *v1.Node:
		_, err = e.client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		if err == nil {
			err = e.factory.Core().V1().Nodes().Informer().GetIndexer().Add(o)
		}
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// forget removes svc from the informer and the clientset, as a forced
// deletion does (its finalizer removed first).
func (e *env) forget(svc *v1.Service) {
	e.t.Helper()
	if err := e.client.CoreV1().Services(svc.Namespace).Delete(e.t.Context(), svc.Name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.factory.Core().V1().Services().Informer().GetIndexer().Delete(svc); err != nil {
		e.t.Fatal(err)
	}
}

// service returns a LoadBalancer Service with one TCP port, as the
// service controller leaves it once provisioned: with its cleanup
// finalizer and the ingress EnsureLoadBalancer returned. It is added to
// the env.
func (e *env) service(ns, name string, uid types.UID) *v1.Service {
	e.t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Finalizers: []string{servicehelper.LoadBalancerCleanupFinalizer}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}}},
	}
	status, err := e.lb.EnsureLoadBalancer(e.t.Context(), testCluster, svc, e.nodes)
	if err != nil {
		e.t.Fatal(err)
	}
	svc.Status.LoadBalancer = *status
	e.add(svc)
	return svc
}

// run runs f, stepping the fake clock over every wait f starts, until f
// returns.
func (e *env) run(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	for {
		select {
		case <-done:
			return
		case <-time.After(time.Millisecond):
			if e.clock.HasWaiters() {
				e.clock.Step(time.Minute)
			}
		}
	}
}

// callsDuring returns the fake's cloud calls that f made, by operation.
func (e *env) callsDuring(f func()) map[fake.Op]int64 {
	before := e.cloud.Calls().ByOp
	f()
	out := map[fake.Op]int64{}
	for op, n := range e.cloud.Calls().ByOp {
		if d := n - before[op]; d != 0 {
			out[op] = d
		}
	}
	return out
}

// update replaces svc in the informer's indexer (not in the clientset).
func (e *env) update(svc *v1.Service) {
	e.t.Helper()
	if err := e.factory.Core().V1().Services().Informer().GetIndexer().Update(svc); err != nil {
		e.t.Fatal(err)
	}
}

// drift changes svc's load balancer behind the CCM's back: a peer of the
// cloud (another client of the same account, whose changes the CCM's
// cache does not hear of) ensures it with ports and nodes.
func (e *env) drift(svc *v1.Service, ports []v1.ServicePort, nodes []*v1.Node) {
	e.t.Helper()
	peer, err := fake.NewPeer(e.cloud, testClusterID, fake.PeerOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	plb, _ := peer.LoadBalancer()
	drifted := svc.DeepCopy()
	drifted.Spec.Ports = ports
	if _, err := plb.EnsureLoadBalancer(e.t.Context(), testCluster, drifted, nodes); err != nil {
		e.t.Fatal(err)
	}
}

// writes sums the write operations of calls.
func writes(calls map[fake.Op]int64) int64 {
	var n int64
	for op, c := range calls {
		if op.Writes() {
			n += c
		}
	}
	return n
}
