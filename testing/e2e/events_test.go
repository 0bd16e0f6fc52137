package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// TestInvalidServiceEvent: a LoadBalancer Service with a field the
// provider cannot use (a spec.loadBalancerIP that is no address, which the
// API server accepts) gets a Warning event with reason InvalidService on
// the Service, recorded by the loadbalancer.Reconciler of the example CCM
// (through the event broadcaster its Initialize starts), whose message
// names the field, the value and what was expected; no load balancer is
// made. Fixing the field converges the Service.
func TestInvalidServiceEvent(t *testing.T) {
	s := newScenario(t, "events")
	_, admin, _ := s.startWithNodes("events", 1, ccm.Config{})

	svc := workload.LoadBalancerService(s.ns, "bad-ip", 80)
	svc.Spec.LoadBalancerIP = "not-an-ip"
	svc = s.createService(svc)
	const want = `spec.loadBalancerIP "not-an-ip": expected an IPv4 or IPv6 address`
	s.waitServiceEvent(svc, "InvalidService", want)
	if lbs, err := admin.LoadBalancers(t.Context()); err != nil {
		t.Fatal(err)
	} else if owned := lbsOf(lbs, svc.UID); len(owned) != 0 {
		t.Errorf("an invalid Service got load balancers %s; want none", describeLBs(owned))
	}

	s.updateService("bad-ip", func(svc *corev1.Service) { svc.Spec.LoadBalancerIP = "" })
	s.waitIngress("bad-ip", changeTimeout)
}

// waitServiceEvent waits for a Warning event with reason on svc whose
// message contains message.
func (s *scenario) waitServiceEvent(svc *corev1.Service, reason, message string) {
	s.t.Helper()
	s.waitEvent(s.ns, svc.UID, corev1.EventTypeWarning, reason, message)
}
