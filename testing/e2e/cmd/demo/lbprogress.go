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
