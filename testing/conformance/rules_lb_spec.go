package conformance

// The rules of the load balancer's spec: source ranges, health checks
// and the optional features a provider claims or rejects.

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cloudprovider "k8s.io/cloud-provider"
)

// prefixSet parses and sorts CIDRs for comparison.
func prefixSet(cidrs []string) ([]string, error) {
	out := make([]string, 0, len(cidrs))
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR: %w", s, err)
		}
		out = append(out, p.Masked().String())
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// restrictingAnnotation is a valid source-range annotation that restricts
// the load balancer: what the kube-apiserver accepts, and a provider must
// honour or reject.
const restrictingAnnotation = "203.0.113.0/24"

func ruleLBSourceRanges(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	const key = v1.AnnotationLoadBalancerSourceRangesKey
	if !r.cfg.Claims.SourceRangesAnnotation && !r.skipCase("annotation-unclaimed") {
		svc := service("source-ranges-annotation-unclaimed", withAnnotation(key, restrictingAnnotation))
		if st, err := lb.EnsureLoadBalancer(r.ctx, c, svc, nodes); err == nil {
			r.Errorf("EnsureLoadBalancer(%s) with the valid annotation %s=%q and Claims.SourceRangesAnnotation unclaimed returned %v and no error: expected an error, not a load balancer open to all", svcKey(svc), key, restrictingAnnotation, st)
		}
	}
	hook := r.target().Hooks.SourceRanges
	if hook == nil {
		if r.cfg.Claims.SourceRanges || r.cfg.Claims.SourceRangesAnnotation {
			r.Skipf("needs Hooks.SourceRanges to check the claimed source ranges")
		}
		r.Logf("Hooks.SourceRanges is nil: only the rejection of an unclaimed annotation was checked")
		return
	}
	for _, k := range r.sourceRangeCases() {
		if r.skipCase(k.name) {
			continue
		}
		if _, err := lb.EnsureLoadBalancer(r.ctx, c, k.svc, nodes); err != nil {
			r.skipIfPlainFails(lb, "source-ranges-plain", nodes)
			r.Errorf("EnsureLoadBalancer(%s) with %s: %v", svcKey(k.svc), k.what, err)
			continue
		}
		r.checkSourceRanges(hook, k)
	}
}

// sourceRangeCase is one Service of LB-SOURCE-RANGES and the sources its
// load balancer must allow: exactly want, or (contain) at least want.
type sourceRangeCase struct {
	name    string
	what    string
	svc     *v1.Service
	want    []string
	contain bool
}

// sourceRangeCases are the cases of LB-SOURCE-RANGES the claims allow.
func (r *rt) sourceRangeCases() []sourceRangeCase {
	const key = v1.AnnotationLoadBalancerSourceRangesKey
	var cases []sourceRangeCase
	cl := r.cfg.Claims
	if cl.SourceRanges {
		cases = append(cases, sourceRangeCase{"spec", "spec.loadBalancerSourceRanges", service("source-ranges-spec", withSourceRanges("192.0.2.0/24", "198.51.100.0/25")), []string{"192.0.2.0/24", "198.51.100.0/25"}, false})
	} else {
		r.Logf("Claims.SourceRanges is false: LB-UNSUPPORTED-REJECTED checks that spec restrictions are rejected")
	}
	if cl.SourceRangesAnnotation {
		cases = append(cases, sourceRangeCase{"annotation", "the source-ranges annotation", service("source-ranges-annotation", withAnnotation(key, restrictingAnnotation)), []string{restrictingAnnotation}, false})
	}
	if cl.SourceRanges && cl.SourceRangesAnnotation {
		cases = append(cases, sourceRangeCase{"spec-and-annotation", "spec and annotation (spec wins)", service("source-ranges-both", withSourceRanges("192.0.2.0/24"), withAnnotation(key, restrictingAnnotation)), []string{"192.0.2.0/24"}, false})
	}
	cases = append(cases, sourceRangeCase{"none", "neither (allow all IPv4)", service("source-ranges-none"), []string{"0.0.0.0/0"}, true})
	if cl.DualStackLoadBalancers {
		cases = append(cases, sourceRangeCase{"none-dual-stack", "neither, dual-stack Service (allow all of both families)", service("source-ranges-none-ds", withDualStack()), []string{"0.0.0.0/0", "::/0"}, true})
	}
	return cases
}

// checkSourceRanges compares the sources k's load balancer allows, read
// through hook, with the case's.
func (r *rt) checkSourceRanges(hook func(context.Context, string, *v1.Service) ([]string, error), k sourceRangeCase) {
	raw, err := hook(r.ctx, r.cfg.ClusterName, k.svc)
	if err != nil {
		r.Fatalf("Hooks.SourceRanges(%s): %v", svcKey(k.svc), err)
	}
	got, err := prefixSet(raw)
	if err != nil {
		r.Errorf("Hooks.SourceRanges(%s): %v", svcKey(k.svc), err)
		return
	}
	if !k.contain {
		if d := cmp.Diff(k.want, got, cmpOpts); d != "" {
			r.Errorf("with %s, the sources allowed to %s differ (-want +got):\n%s", k.what, svcKey(k.svc), d)
		}
		return
	}
	for _, w := range k.want {
		if !slices.Contains(got, w) {
			r.Errorf("with %s, the sources allowed to %s are %v, expected them to include %s", k.what, svcKey(k.svc), got, w)
		}
	}
}

func ruleLBSourceRangesMalformed(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	const key = v1.AnnotationLoadBalancerSourceRangesKey
	bad := service("source-ranges-bad", withAnnotation(key, "10.0.0.0/8,not-a-cidr"))
	if st, err := lb.EnsureLoadBalancer(r.ctx, c, bad, nodes); err == nil {
		r.Errorf("EnsureLoadBalancer(%s) with annotation %s=%q returned %v and no error, expected an error naming the malformed value (not a silent allow-all)", svcKey(bad), key, bad.Annotations[key], st)
		return
	}
	// Rejected: nor may a load balancer built before the error be open to
	// all.
	hook := r.target().Hooks.SourceRanges
	if hook == nil || !r.exists(lb, c, bad) {
		return
	}
	raw, err := hook(r.ctx, c, bad)
	if err != nil {
		// GetLoadBalancer's answer is LB-GET-EXISTS's to check.
		r.Logf("GetLoadBalancer(%s) reports a load balancer after the rejection, but Hooks.SourceRanges finds none: %v", svcKey(bad), err)
		return
	}
	got, err := prefixSet(raw)
	if err != nil {
		r.Fatalf("Hooks.SourceRanges(%s): %v", svcKey(bad), err)
	}
	for _, all := range []string{"0.0.0.0/0", "::/0"} {
		if slices.Contains(got, all) {
			r.Errorf("EnsureLoadBalancer(%s) with annotation %s=%q returned an error, but left a load balancer that allows %s (sources %v), expected none or a restricted one", svcKey(bad), key, bad.Annotations[key], all, got)
		}
	}
}

func ruleLBHealthCheck(r *rt) {
	lb := r.lb()
	r.needHook("HealthCheck", r.target().Hooks.HealthCheck)
	svc := service("health-check", withLocalTraffic(32123))
	if got := r.healthCheck(lb, svc, "externalTrafficPolicy Local and healthCheckNodePort 32123"); got != (HealthCheck{Port: 32123, Path: "/healthz"}) {
		r.Errorf("with externalTrafficPolicy Local, the health check of %s is %+v, expected port 32123 (spec.healthCheckNodePort) path /healthz", svcKey(svc), got)
	}
	// Switched to Cluster, the Service loses its healthCheckNodePort (the
	// API server releases it): a check still on it fails every backend.
	svc = svc.DeepCopy()
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	svc.Spec.HealthCheckNodePort = 0
	if got := r.healthCheck(lb, svc, "externalTrafficPolicy changed to Cluster"); got.Port == 32123 {
		r.Errorf("with externalTrafficPolicy changed to Cluster, the health check of %s is still %+v, on the released healthCheckNodePort 32123", svcKey(svc), got)
	}
}

// healthCheck ensures svc's load balancer (what says with what) and returns
// its health check, through Hooks.HealthCheck. When the Ensure fails, and a
// plain Service's fails too, the rule is skipped (see skipIfPlainFails).
func (r *rt) healthCheck(lb retryLB, svc *v1.Service, what string) HealthCheck {
	nodes := r.nodes(1)
	if _, err := lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, svc, nodes); err != nil {
		r.skipIfPlainFails(lb, svc.Name+"-plain", nodes)
		r.Fatalf("EnsureLoadBalancer(%s) with %s: %v", svcKey(svc), what, err)
	}
	got, err := r.target().Hooks.HealthCheck(r.ctx, r.cfg.ClusterName, svc)
	if err != nil {
		r.Fatalf("Hooks.HealthCheck(%s): %v", svcKey(svc), err)
	}
	return got
}

func ruleLBHealthCheckCluster(r *rt) {
	lb := r.lb()
	r.needHook("HealthCheck", r.target().Hooks.HealthCheck)
	svc := service("health-check-cluster")
	want := HealthCheck{Port: 10256, Path: "/healthz"}
	if d := cmp.Diff(want, r.healthCheck(lb, svc, "externalTrafficPolicy Cluster")); d != "" {
		r.Errorf("with externalTrafficPolicy Cluster, the health check of %s differs from kube-proxy's (-want +got):\n%s", svcKey(svc), d)
	}
}

// featureCase is one load-balancer variant behind a feature claim: name is
// the claim (Claims field), id the case name in Config.Skip.
type featureCase struct {
	id      string
	name    string
	claimed bool
	svc     *v1.Service
}

func (r *rt) featureCases() []featureCase {
	cl := r.cfg.Claims
	udp := v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53), NodePort: 30053}
	sctp := v1.ServicePort{Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 9999, TargetPort: intstr.FromInt32(9999), NodePort: 30999}
	return []featureCase{
		{"udp", "UDP", cl.UDP, service("feature-udp", withPorts(udp))},
		{"sctp", "SCTP", cl.SCTP, service("feature-sctp", withPorts(sctp))},
		{"mixed-protocols", "MixedProtocols", cl.MixedProtocols, service("feature-mixed", withPorts(tcpPort("dns-tcp", 53, 30054), udp))},
		{"dual-stack", "DualStackLoadBalancers", cl.DualStackLoadBalancers, service("feature-dual-stack", withDualStack())},
		{"node-port-less", "NodePortless", cl.NodePortless, service("feature-no-node-ports", withoutNodePorts())},
		{"source-ranges", "SourceRanges", cl.SourceRanges, service("feature-source-ranges", withSourceRanges("192.0.2.0/24"))},
	}
}

func ruleLBUnsupportedRejected(r *rt) {
	lb := r.lb()
	r.nodes(1) // skips the rule without a fixture node
	ran := false
	for _, fc := range r.featureCases() {
		// A RequireDualStack Service served single-stack is
		// LB-DUAL-STACK-REJECTED's, a recommendation.
		if fc.claimed || fc.id == "dual-stack" || r.skipCase(fc.id) {
			continue
		}
		ran = true
		r.rejects(lb, fc)
	}
	if !ran {
		r.Skipf("every feature is claimed (or skipped)")
	}
}

// rejects checks that EnsureLoadBalancer of fc's Service, whose feature is
// not claimed, fails.
func (r *rt) rejects(lb retryLB, fc featureCase) {
	st, err := lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, fc.svc, r.nodes(1))
	if err == nil {
		r.Errorf("EnsureLoadBalancer(%s) needs %s, which is not claimed, but returned %v and no error: expected an error, not a load balancer built differently", svcKey(fc.svc), fc.name, st)
	}
}

func ruleLBDualStackRejected(r *rt) {
	lb := r.lb()
	for _, fc := range r.featureCases() {
		if fc.id != "dual-stack" {
			continue
		}
		if fc.claimed {
			r.Skipf("DualStackLoadBalancers is claimed: LB-CLAIMED-FEATURES checks it")
		}
		r.rejects(lb, fc)
	}
}

func ruleLBClaimedFeatures(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	ran := false
	for _, fc := range r.featureCases() {
		if !fc.claimed || r.skipCase(fc.id) {
			continue
		}
		ran = true
		st, err := lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, fc.svc, nodes)
		if err != nil || st == nil || len(st.Ingress) == 0 {
			r.skipIfPlainFails(lb, "feature-plain", nodes)
			r.Errorf("EnsureLoadBalancer(%s) with claimed feature %s = (%v, %v), expected a status with an ingress", svcKey(fc.svc), fc.name, st, err)
			continue
		}
		// An ingress reported by hostname alone hides its family; without
		// Claims.HostnameIngress, LB-INGRESS-VALID reports it.
		if fc.id == "dual-stack" && !r.cfg.Claims.HostnameIngress {
			fams := map[bool]bool{}
			for _, in := range st.Ingress {
				if ip, err := netip.ParseAddr(in.IP); err == nil {
					fams[ip.Is6()] = true
				}
			}
			if (fams[false] || fams[true]) && (!fams[false] || !fams[true]) {
				r.Errorf("EnsureLoadBalancer(%s) with RequireDualStack returned ingress %v, expected an IP of each family", svcKey(fc.svc), st.Ingress)
			}
		}
		if r.target().Hooks.Listeners != nil {
			if d := cmp.Diff(r.wantListeners(fc.svc), r.listeners(fc.svc), cmpOpts, ignoreAppProtocol); d != "" {
				r.Errorf("with claimed feature %s, the listeners of %s differ from its ports (-want +got):\n%s", fc.name, svcKey(fc.svc), d)
			}
		}
	}
	if !ran {
		r.Skipf("no load-balancer feature is claimed")
	}
}

// lbCluster is one of the two clusters of LB-CLUSTER-ISOLATION: the
// provider it calls, its clusterName argument, its Service, and how
// messages name it.
type lbCluster struct {
	lb      cloudprovider.LoadBalancer
	cluster string
	svc     *v1.Service
	desc    string
}
