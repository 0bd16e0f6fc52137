package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// The demo's periods of ccmkit's housekeeping controllers (package
// housekeeping): short, so that its steps show in seconds. A cluster runs
// with the defaults (10m, 5m, 15m).
const (
	driftPeriod  = 5 * time.Second
	orphanPeriod = 2 * time.Second
	orphanGrace  = 5 * time.Second
)

// housekeepingArgs are the example CCM's flags for the demo's periods.
func housekeepingArgs() []string {
	return []string{
		"--drift-repair-period=" + driftPeriod.String(),
		"--orphan-collection-period=" + orphanPeriod.String(),
		"--orphan-grace-period=" + orphanGrace.String(),
	}
}

// showDrift breaks the first Service's load balancer behind the CCM's
// back, through the fake's admin endpoint as a user in a cloud console
// would (one listener and one backend removed), and waits until the
// drift-repair controller has put it back.
func (d *demo) showDrift(ctx context.Context, timeout time.Duration) error {
	if d.services == 0 {
		return nil
	}
	svc, err := d.st.Client.CoreV1().Services(namespace).Get(ctx, d.serviceName(0), metav1.GetOptions{})
	if err != nil {
		return err
	}
	lb, err := d.lbOf(ctx, string(svc.UID))
	if err != nil {
		return err
	}
	listeners, backends := len(lb.Spec.Listeners), len(lb.Spec.Backends)
	l := lb.Spec.Listeners[len(lb.Spec.Listeners)-1]
	if _, err := d.st.Admin.RemoveListener(ctx, lb.ID, l.Protocol, l.Port); err != nil {
		return err
	}
	removed := ""
	if backends > 0 {
		b := lb.Spec.Backends[0]
		key := b.NodeName
		if key == "" {
			key = b.ProviderID // the realistic mode keeps backends by instance
		}
		if _, err := d.st.Admin.RemoveBackend(ctx, lb.ID, key); err != nil {
			return err
		}
		removed = " and backend " + key
	}
	start := time.Now()
	d.logf("drift: removed listener %s/%d%s from load balancer %s in the cloud, behind the CCM's back", l.Protocol, l.Port, removed, lb.Name)
	var repaired fake.LoadBalancer
	err = workload.Poll(ctx, timeout, "the drift repaired", func(ctx context.Context) (bool, string) {
		now, err := d.lbOf(ctx, string(svc.UID))
		if err != nil {
			return false, err.Error()
		}
		repaired = now
		return len(now.Spec.Listeners) == listeners && len(now.Spec.Backends) == backends,
			fmt.Sprintf("%d/%d listeners, %d/%d backends", len(now.Spec.Listeners), listeners, len(now.Spec.Backends), backends)
	})
	if err != nil {
		return err
	}
	d.logf("drift repaired by the drift-repair controller after %.1fs (period %s): %d listeners, %d backends again", time.Since(start).Seconds(), driftPeriod, listeners, backends)
	// The removed listener may be the HTTPS one: it is back with its
	// application protocol and certificate.
	for _, line := range listenerLines(namespace+"/"+svc.Name, repaired) {
		d.logf("%s", line)
	}
	return nil
}

// showOrphan puts in the cloud what a Service deleted while the CCM was
// down leaves behind: a load balancer tagged for this cluster whose
// Service UID does not exist; and one without ccmkit's tags, made by
// hand. It waits until the orphan-collection controller has deleted the
// first, after the grace period, and checks that the second stays.
func (d *demo) showOrphan(ctx context.Context, timeout time.Duration) error {
	spec := loadbalancer.Spec{IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, Listeners: []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: corev1.IPv4Protocol, Protocol: corev1.ProtocolTCP, Port: 80}, NodePort: 30080}}}
	orphan, err := d.st.Admin.CreateLoadBalancer(ctx, loadbalancer.LoadBalancer{Name: "demo-old-web", Spec: spec, Tags: map[string]string{
		loadbalancer.TagCluster: cluster, loadbalancer.TagServiceUID: "0f1e2d3c-gone", loadbalancer.TagService: namespace + "/old-web"}})
	if err != nil {
		return err
	}
	handMade, err := d.st.Admin.CreateLoadBalancer(ctx, loadbalancer.LoadBalancer{Name: "hand-made", Spec: spec})
	if err != nil {
		return err
	}
	start := time.Now()
	d.logf("orphan: load balancer %s (%s) tagged for cluster %s and Service %s/old-web, whose UID is gone (as a Service deleted while the CCM was down leaves it); and %s (%s), without ccmkit's tags",
		orphan.Name, orphan.ID, cluster, namespace, handMade.Name, handMade.ID)
	err = workload.Poll(ctx, timeout, "the orphan collected", func(ctx context.Context) (bool, string) {
		lbs, err := d.st.Admin.LoadBalancers(ctx)
		if err != nil {
			return false, err.Error()
		}
		return !hasLB(lbs, orphan.ID), fmt.Sprintf("%d load balancers", len(lbs))
	})
	if err != nil {
		return err
	}
	lbs, err := d.st.Admin.LoadBalancers(ctx)
	if err != nil {
		return err
	}
	if !hasLB(lbs, handMade.ID) {
		return fmt.Errorf("the load balancer without ccmkit's tags, %s, was deleted", handMade.ID)
	}
	d.logf("orphan collected by the orphan-collection controller after %.1fs (grace period %s); %s, without ccmkit's tags, untouched", time.Since(start).Seconds(), orphanGrace, handMade.Name)
	return nil
}

// lbOf returns the load balancer of the Service with uid.
func (d *demo) lbOf(ctx context.Context, uid string) (fake.LoadBalancer, error) {
	lbs, err := d.st.Admin.LoadBalancers(ctx)
	if err != nil {
		return fake.LoadBalancer{}, err
	}
	for _, lb := range lbs {
		if lb.Tags[loadbalancer.TagServiceUID] == uid {
			return lb, nil
		}
	}
	return fake.LoadBalancer{}, fmt.Errorf("no load balancer for service UID %s", uid)
}

func hasLB(lbs []fake.LoadBalancer, id string) bool {
	for _, lb := range lbs {
		if lb.ID == id {
			return true
		}
	}
	return false
}
