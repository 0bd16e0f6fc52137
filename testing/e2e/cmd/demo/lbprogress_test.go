package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

func TestLBProgress(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	const delay = 3 * time.Second
	svc := func(name string, ingress ...string) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, UID: types.UID("uid-" + name)}}
		for _, ip := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	lb := func(id, svcName string, provisioning bool, readyAt time.Time) fake.LoadBalancer {
		return fake.LoadBalancer{LoadBalancer: loadbalancer.LoadBalancer{ID: id, Tags: map[string]string{loadbalancer.TagServiceUID: "uid-" + svcName}}, Provisioning: provisioning, ReadyAt: readyAt}
	}
	listener := func(family corev1.IPFamily, port int32, appProtocol, cert string) loadbalancer.Listener {
		l := loadbalancer.Listener{ListenerKey: loadbalancer.ListenerKey{Family: family, Protocol: corev1.ProtocolTCP, Port: port}, AppProtocol: appProtocol}
		if cert != "" {
			l.Settings = map[string]string{certificateAnnotation: cert}
		}
		return l
	}
	withListeners := func(lb fake.LoadBalancer, ls ...loadbalancer.Listener) fake.LoadBalancer {
		lb.Spec.Listeners = ls
		return lb
	}
	type poll struct {
		now  time.Time
		lbs  []fake.LoadBalancer
		svcs []corev1.Service
		want []string
	}
	tests := []struct {
		name      string
		reason    string
		polls     []poll
		wantReady int
	}{
		{
			name:   "provisioning then ready",
			reason: "one provisioning line while the cloud has no address, once; one ready line when the Service has its ingress, timed from the load balancer's creation",
			polls: []poll{
				{now: t0, svcs: []corev1.Service{svc("web")}},
				{now: t0.Add(100 * time.Millisecond), lbs: []fake.LoadBalancer{lb("lb-1", "web", true, t0.Add(delay))}, svcs: []corev1.Service{svc("web")},
					want: []string{"service demo/web: load balancer lb-1 provisioning, no address yet…"}},
				{now: t0.Add(time.Second), lbs: []fake.LoadBalancer{lb("lb-1", "web", true, t0.Add(delay))}, svcs: []corev1.Service{svc("web")}},
				{now: t0.Add(3200 * time.Millisecond), lbs: []fake.LoadBalancer{lb("lb-1", "web", false, t0.Add(delay))}, svcs: []corev1.Service{svc("web", "198.18.0.1")},
					want: []string{"service demo/web: load balancer lb-1 ready after 3.2s, ingress 198.18.0.1"}},
				{now: t0.Add(4 * time.Second), lbs: []fake.LoadBalancer{lb("lb-1", "web", false, t0.Add(delay))}, svcs: []corev1.Service{svc("web", "198.18.0.1")}},
			},
			wantReady: 1,
		},
		{
			name:   "ready at once, two services",
			reason: "a load balancer first seen ready gets only the ready line; without readyAt (no delay) or without a load balancer the time is left out; lines follow the Services' order",
			polls: []poll{
				{now: t0, lbs: []fake.LoadBalancer{lb("lb-2", "api", false, time.Time{}), lb("lb-1", "web", false, t0.Add(-time.Second))},
					svcs: []corev1.Service{svc("web", "198.18.0.1"), svc("api", "198.18.0.2", "2001:db8:1b::2"), svc("db", "198.18.0.3")},
					want: []string{
						"service demo/web: load balancer lb-1 ready after 4.0s, ingress 198.18.0.1",
						"service demo/api: load balancer lb-2 ready, ingress 198.18.0.2, 2001:db8:1b::2",
						"service demo/db: load balancer ready, ingress 198.18.0.3",
					}},
			},
			wantReady: 3,
		},
		{
			name:   "https listener",
			reason: "with the ready line, one line per listener that serves an application protocol or presents a certificate, once per port of a dual-stack load balancer; a plain listener gets none",
			polls: []poll{
				{now: t0, lbs: []fake.LoadBalancer{withListeners(lb("lb-1", "web", false, time.Time{}),
					listener(corev1.IPv4Protocol, 80, "", ""), listener(corev1.IPv4Protocol, 443, "https", "cert-web"),
					listener(corev1.IPv6Protocol, 80, "", ""), listener(corev1.IPv6Protocol, 443, "https", "cert-web"),
					listener(corev1.IPv4Protocol, 8443, "", "cert-api"), listener(corev1.IPv4Protocol, 8080, "kubernetes.io/h2c", ""))},
					svcs: []corev1.Service{svc("web", "198.18.0.1", "2001:db8:1b::1")},
					want: []string{
						"service demo/web: load balancer lb-1 ready, ingress 198.18.0.1, 2001:db8:1b::1",
						"service demo/web: listener 443/TCP serves https with certificate cert-web",
						"service demo/web: listener 8443/TCP with certificate cert-api",
						"service demo/web: listener 8080/TCP serves kubernetes.io/h2c",
					}},
				{now: t0.Add(time.Second), lbs: []fake.LoadBalancer{withListeners(lb("lb-1", "web", false, time.Time{}), listener(corev1.IPv4Protocol, 443, "https", "cert-web"))},
					svcs: []corev1.Service{svc("web", "198.18.0.1", "2001:db8:1b::1")}},
			},
			wantReady: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newLBProgress(delay)
			for i, pl := range tt.polls {
				if diff := cmp.Diff(pl.want, p.update(pl.now, pl.lbs, pl.svcs)); diff != "" {
					t.Errorf("%s: poll %d: lines (-want +got):\n%s", tt.reason, i, diff)
				}
			}
			if got := p.readyCount(); got != tt.wantReady {
				t.Errorf("%s: readyCount() = %d, want %d", tt.reason, got, tt.wantReady)
			}
		})
	}
}
