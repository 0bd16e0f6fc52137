package main

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// lbProgress turns what the demo polls — the cloud's load balancers and
// the Services — into one line per step of each Service's load balancer:
// "provisioning…" when the cloud has it without an address, and "ready"
// once the Service has its ingress. It is not safe for concurrent use.
type lbProgress struct {
	// delay is the cloud's provisioning delay: a load balancer was
	// created at its ReadyAt minus delay.
	delay time.Duration
	// provisioning and ready hold the load-balancer IDs and the Service
	// keys (namespace/name) already reported.
	provisioning, ready map[string]bool
}

func newLBProgress(delay time.Duration) *lbProgress {
	return &lbProgress{delay: delay, provisioning: map[string]bool{}, ready: map[string]bool{}}
}

// readyCount returns how many Services were reported ready.
func (p *lbProgress) readyCount() int { return len(p.ready) }

// update returns the lines for what changed since the last call, seen at
// now: for each load balancer newly seen provisioning,
//
//	service ns/web: load balancer lb-1 provisioning, no address yet…
//
// and for each Service newly seen with an ingress,
//
//	service ns/web: load balancer lb-1 ready after 3.2s, ingress 198.18.0.1
//
// followed, for each listener of its load balancer that serves an
// application protocol or presents a certificate, by
//
//	service ns/web: listener 443/TCP serves https with certificate cert-web
//
// where the time runs from the load balancer's creation (its ReadyAt minus
// the delay) to now, when the Service has the address: the cloud's
// provisioning plus the service controller's retry. Without a ReadyAt (a
// load balancer ready at once) or a load balancer, the time is left out.
// Lines come in the order of svcs.
func (p *lbProgress) update(now time.Time, lbs []fake.LoadBalancer, svcs []corev1.Service) []string {
	byUID := map[string]fake.LoadBalancer{}
	for _, lb := range lbs {
		byUID[lb.Tags[loadbalancer.TagServiceUID]] = lb
	}
	var lines []string
	for i := range svcs {
		svc := &svcs[i]
		key := svc.Namespace + "/" + svc.Name
		lb, found := byUID[string(svc.UID)]
		ingress := workload.IngressIPs(svc)
		switch {
		case p.ready[key]:
		case len(ingress) > 0:
			p.ready[key] = true
			lines = append(lines, p.readyLine(now, key, lb, found, ingress))
			if found {
				lines = append(lines, listenerLines(key, lb)...)
			}
		case found && lb.Provisioning && !p.provisioning[lb.ID]:
			p.provisioning[lb.ID] = true
			lines = append(lines, fmt.Sprintf("service %s: load balancer %s provisioning, no address yet…", key, lb.ID))
		}
	}
	return lines
}

func (p *lbProgress) readyLine(now time.Time, key string, lb fake.LoadBalancer, found bool, ingress []string) string {
	what := "load balancer ready"
	if found {
		what = "load balancer " + lb.ID + " ready"
		if !lb.ReadyAt.IsZero() {
			created := lb.ReadyAt.Add(-p.delay)
			what += fmt.Sprintf(" after %.1fs", now.Sub(created).Seconds())
		}
	}
	return fmt.Sprintf("service %s: %s, ingress %s", key, what, strings.Join(ingress, ", "))
}

// certificateAnnotation is the fake's per-port certificate reference,
// which each listener keeps in its Settings (fake/annotations.go).
const certificateAnnotation = "fake.ccmkit.io/certificate"

// listenerLines returns a line for each listener of lb that serves an
// application protocol or presents a certificate, once per port and
// protocol (a dual-stack load balancer has one listener per IP family).
func listenerLines(key string, lb fake.LoadBalancer) []string {
	var lines []string
	seen := map[loadbalancer.ListenerKey]bool{}
	for _, l := range lb.Spec.Listeners {
		cert := l.Settings[certificateAnnotation]
		k := loadbalancer.ListenerKey{Protocol: l.Protocol, Port: l.Port}
		if l.AppProtocol == "" && cert == "" || seen[k] {
			continue
		}
		seen[k] = true
		line := fmt.Sprintf("service %s: listener %d/%s", key, l.Port, l.Protocol)
		if l.AppProtocol != "" {
			line += " serves " + l.AppProtocol
		}
		if cert != "" {
			line += " with certificate " + cert
		}
		lines = append(lines, line)
	}
	return lines
}
