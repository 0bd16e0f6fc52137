package conformance_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// brokenLBFeatures returns the broken providers of the load-balancer feature
// rules: LB-INGRESS-VALID, LB-SOURCE-RANGES(-MALFORMED),
// LB-HEALTH-CHECK(-CLUSTER), LB-UNSUPPORTED-REJECTED, LB-DUAL-STACK-REJECTED
// and LB-CLAIMED-FEATURES.
func brokenLBFeatures() []brokenCase {
	type bc = brokenCase
	return narrowed(lbOnly, []bc{
		// LB-INGRESS-VALID
		{
			name: "ingress-ip-as-cidr", want: "LB-INGRESS-VALID", clause: "a valid IP",
			reason: "the ingress IP is written as a /32 prefix, which the API server rejects",
			b: lbRewriteIngress(func(in *v1.LoadBalancerIngress) {
				if in.IP != "" {
					in.IP += "/32"
				}
			}),
		},
		{
			name: "ingress-hostname-not-dns", want: "LB-INGRESS-VALID", clause: "a DNS hostname",
			reason: "the ingress carries the cloud's display name of the load balancer as hostname, upper case and underscores, which is no DNS name",
			b: lbRewriteIngress(func(in *v1.LoadBalancerIngress) {
				in.Hostname = "LB_" + strings.NewReplacer(".", "_", ":", "_").Replace(in.IP) + ".Example.com"
			}),
		},
		{
			name: "hostname-is-ip", want: "LB-INGRESS-VALID", clause: "that is not an IP",
			reason: "the ingress repeats its IP as hostname, which the API server rejects",
			b:      lbRewriteIngress(func(in *v1.LoadBalancerIngress) { in.Hostname = in.IP }),
		},
		{
			name: "ingress-hostname-unclaimed", want: "LB-INGRESS-VALID", clause: "a hostname alone only with Claims.HostnameIngress",
			reason: "HostnameIngress unclaimed: the ingress reports a DNS name instead of the IP, so a Service's users and the suite cannot see the address",
			b:      lbRewriteIngress(lbIPToHostname),
		},
		{
			name: "ingress-ipmode-without-ip", want: "LB-INGRESS-VALID", clause: "ipMode only with an IP",
			reason: "with HostnameIngress: the ingress reports a DNS name and ipMode VIP, which the API server rejects without an IP",
			claims: func(c *conformance.Claims) { c.HostnameIngress = true },
			b: lbRewriteIngress(func(in *v1.LoadBalancerIngress) {
				lbIPToHostname(in)
				in.IPMode = ptr.To(v1.LoadBalancerIPModeVIP)
			}),
		},

		// LB-SOURCE-RANGES
		{
			name: "ignores-spec-source-ranges", want: "LB-SOURCE-RANGES", clause: "Allowed sources are spec.loadBalancerSourceRanges",
			reason: "spec.loadBalancerSourceRanges is ignored: the load balancer is open to all",
			b: lbRewriteService(func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = nil
			}),
		},
		{
			name: "annotation-overrides-spec-source-ranges", want: "LB-SOURCE-RANGES", clause: "Allowed sources are spec.loadBalancerSourceRanges",
			reason: "the source-range annotation takes precedence over spec.loadBalancerSourceRanges, the reverse of upstream's GetLoadBalancerSourceRanges",
			b: lbRewriteService(func(s *v1.Service) {
				if _, ok := s.Annotations[v1.AnnotationLoadBalancerSourceRangesKey]; ok {
					s.Spec.LoadBalancerSourceRanges = nil
				}
			}),
		},
		{
			name: "ignores-source-ranges-annotation", want: "LB-SOURCE-RANGES", clause: "else the valid annotation",
			reason: "only spec.loadBalancerSourceRanges is read; a valid restricting annotation is ignored, the load balancer open to all",
			b:      stripSourceRangesAnnotation(true),
		},
		{
			name: "opens-unclaimed-annotation-to-all", want: "LB-SOURCE-RANGES", clause: "unclaimed, a restricting annotation is rejected, not opened to all",
			reason: "SourceRangesAnnotation unclaimed: a valid restricting annotation is ignored instead of rejected, the load balancer open to all",
			claims: func(c *conformance.Claims) { c.SourceRangesAnnotation = false },
			config: func(c *conformance.Config) {
				c.Unclaimed = map[string]string{"SourceRangesAnnotation": "the provider reads spec.loadBalancerSourceRanges only"}
			},
			b: stripSourceRangesAnnotation(true),
		},
		{
			name: "dual-stack-opens-ipv4-only", want: "LB-SOURCE-RANGES", clause: "else all of each IP family of the Service",
			reason: "without source ranges, the load balancer allows 0.0.0.0/0 only, so a dual-stack Service is closed to every IPv6 client",
			b: lbRewriteService(func(s *v1.Service) {
				if _, ok := s.Annotations[v1.AnnotationLoadBalancerSourceRangesKey]; !ok && len(s.Spec.LoadBalancerSourceRanges) == 0 && len(s.Spec.IPFamilies) == 2 {
					s.Spec.LoadBalancerSourceRanges = []string{"0.0.0.0/0"}
				}
			}),
		},

		// LB-SOURCE-RANGES-MALFORMED
		{
			name: "accepts-malformed-source-ranges", want: "LB-SOURCE-RANGES-MALFORMED", clause: "rejects a malformed source-range annotation with an error",
			reason: "a malformed annotation (which the kube-apiserver rejects on create and change) is ignored, the load balancer open to all",
			b:      stripSourceRangesAnnotation(false),
		},
		{
			name: "malformed-source-ranges-built-open", want: "LB-SOURCE-RANGES-MALFORMED", clause: "instead of opening the load balancer to all",
			reason: "a malformed annotation is reported with an error only after the load balancer was built without it, open to all",
			b: lbWrap(func(b *wrappedLB) {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					annotated, perr := lbRangesAnnotation(s)
					if !annotated || perr == nil {
						return next.EnsureLoadBalancer(ctx, c, s, n)
					}
					open := s.DeepCopy()
					delete(open.Annotations, v1.AnnotationLoadBalancerSourceRangesKey)
					if _, err := next.EnsureLoadBalancer(ctx, c, open, n); err != nil {
						return nil, err
					}
					return nil, fmt.Errorf("service %s/%s: %w", s.Namespace, s.Name, perr)
				}
			}),
		},

		// LB-HEALTH-CHECK
		{
			name: "ignores-local-traffic", want: "LB-HEALTH-CHECK", clause: "backends are checked on spec.healthCheckNodePort /healthz",
			reason: "externalTrafficPolicy is ignored: Local Services are health-checked like Cluster ones",
			b: lbRewriteService(func(s *v1.Service) {
				s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyCluster, 0
			}),
		},
		{
			name: "local-health-check-on-root-path", want: "LB-HEALTH-CHECK", clause: "backends are checked on spec.healthCheckNodePort /healthz",
			reason: "the cloud driver probes the health-check node port on / (kube-proxy answers 404 there: every backend is down), and reports the /healthz it was asked for",
			target: lbFakeTargetWith(fake.Options{Interceptor: fake.Funcs{
				ApplyLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
					switch {
					case a.Kind == loadbalancer.ActionCreate && a.Create != nil:
						c := *a.Create
						c.Spec.HealthCheck = lbRootPath(c.Spec.HealthCheck)
						a.Create = &c
					case a.Kind == loadbalancer.ActionUpdateHealthCheck && a.HealthCheck != nil:
						hc := lbRootPath(*a.HealthCheck)
						a.HealthCheck = &hc
					}
					lb, err := next.Apply(ctx, a)
					return lbReportHealthzPath(lb), err
				},
				FindLoadBalancers: func(ctx context.Context, next loadbalancer.Driver, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
					lbs, err := next.Find(ctx, q)
					for i := range lbs {
						lbs[i] = lbReportHealthzPath(lbs[i])
					}
					return lbs, err
				},
			}}),
		},
		{
			name: "stale-health-check-node-port", want: "LB-HEALTH-CHECK", clause: "no longer on it once the Service is switched to Cluster",
			reason: "a Service switched from Local to Cluster keeps its health check on the released healthCheckNodePort",
			b: lbWrap(func(b *wrappedLB) {
				var last sync.Map // lbKey → the last healthCheckNodePort
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if s.Spec.HealthCheckNodePort != 0 {
						last.Store(lbKey(c, s), s.Spec.HealthCheckNodePort)
					} else if p, ok := last.Load(lbKey(c, s)); ok {
						s = s.DeepCopy()
						s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, p.(int32)
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
			}),
		},

		// LB-HEALTH-CHECK-CLUSTER
		{
			name: "cluster-health-check-on-node-port", want: "LB-HEALTH-CHECK-CLUSTER", clause: "backends are checked on kube-proxy's 10256 /healthz",
			reason: "with externalTrafficPolicy Cluster, backends are checked on the Service's first node port, not on kube-proxy's health",
			b: lbRewriteService(func(s *v1.Service) {
				if s.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal && len(s.Spec.Ports) > 0 && s.Spec.Ports[0].NodePort != 0 {
					s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, s.Spec.Ports[0].NodePort
				}
			}),
		},

		// LB-UNSUPPORTED-REJECTED
		{
			name: "udp-built-as-tcp", want: "LB-UNSUPPORTED-REJECTED", clause: "UDP",
			reason: "UDP is not supported, and UDP ports are silently built as TCP",
			claims: func(c *conformance.Claims) { c.UDP, c.MixedProtocols = false, false },
			b:      lbRewriteService(lbProtocolAs(v1.ProtocolUDP, v1.ProtocolTCP)),
		},
		{
			name: "sctp-built-as-tcp", want: "LB-UNSUPPORTED-REJECTED", clause: "SCTP",
			reason: "SCTP is not supported, and SCTP ports are silently built as TCP",
			claims: func(c *conformance.Claims) { c.SCTP = false },
			b:      lbRewriteService(lbProtocolAs(v1.ProtocolSCTP, v1.ProtocolTCP)),
		},
		{
			name: "mixed-protocols-first-wins", want: "LB-UNSUPPORTED-REJECTED", clause: "mixed protocols",
			reason: "a load balancer has one protocol, that of the Service's first port: the ports of any other protocol are silently left out",
			claims: func(c *conformance.Claims) { c.MixedProtocols = false },
			b: lbRewriteService(func(s *v1.Service) {
				if len(s.Spec.Ports) == 0 {
					return
				}
				first := s.Spec.Ports[0].Protocol
				s.Spec.Ports = slices.DeleteFunc(s.Spec.Ports, func(p v1.ServicePort) bool { return p.Protocol != first })
			}),
		},
		{
			name: "node-port-less-gets-node-ports", want: "LB-UNSUPPORTED-REJECTED", clause: "no node ports",
			reason: "listeners need node ports, and a Service without them gets node ports the provider makes up, on which no node listens",
			claims: func(c *conformance.Claims) { c.NodePortless = false },
			b:      lbRewriteService(lbMadeUpNodePorts),
		},
		{
			name: "spec-source-ranges-ignored", want: "LB-UNSUPPORTED-REJECTED", clause: "spec source ranges",
			reason: "source ranges are not supported, and spec.loadBalancerSourceRanges is silently ignored: the load balancer is open to all",
			claims: func(c *conformance.Claims) { c.SourceRanges = false },
			b: lbRewriteService(func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = nil
			}),
		},

		// LB-DUAL-STACK-REJECTED
		{
			name: "dual-stack-served-single-stack", want: "LB-DUAL-STACK-REJECTED", clause: "returns an error for a RequireDualStack Service instead of serving it single-stack",
			reason: "DualStackLoadBalancers unclaimed: a RequireDualStack Service gets a load balancer of its first family only, without an error",
			claims: func(c *conformance.Claims) { c.DualStackLoadBalancers = false },
			b: lbRewriteService(func(s *v1.Service) {
				if p := s.Spec.IPFamilyPolicy; p != nil && *p == v1.IPFamilyPolicyRequireDualStack {
					single := v1.IPFamilyPolicySingleStack
					s.Spec.IPFamilyPolicy = &single
					s.Spec.IPFamilies = s.Spec.IPFamilies[:1]
					s.Spec.ClusterIPs = s.Spec.ClusterIPs[:min(1, len(s.Spec.ClusterIPs))]
				}
			}),
		},

		// LB-CLAIMED-FEATURES
		{
			name: "claimed-sctp-rejected", want: "LB-CLAIMED-FEATURES", clause: "builds each claimed feature as asked",
			reason: "SCTP is claimed, but EnsureLoadBalancer rejects SCTP ports",
			b: lbShortCircuit(lbEnsure, func(_ context.Context, s *v1.Service, _ []*v1.Node) (bool, error) {
				for _, p := range s.Spec.Ports {
					if p.Protocol == v1.ProtocolSCTP {
						return true, fmt.Errorf("service %s/%s: port %s: protocol SCTP is not supported", s.Namespace, s.Name, p.Name)
					}
				}
				return false, nil
			}),
		},
		{
			name: "claimed-udp-built-as-tcp", want: "LB-CLAIMED-FEATURES", clause: "protocols",
			reason: "UDP is claimed, but UDP ports are built as TCP listeners",
			b:      lbRewriteService(lbProtocolAs(v1.ProtocolUDP, v1.ProtocolTCP)),
		},
		{
			name: "listeners-keyed-by-port-number", want: "LB-CLAIMED-FEATURES", clause: "ports",
			reason: "listeners are keyed by port number alone, so a mixed-protocol Service's TCP and UDP port 53 become one listener",
			b: lbRewriteService(func(s *v1.Service) {
				seen := map[int32]bool{}
				s.Spec.Ports = slices.DeleteFunc(s.Spec.Ports, func(p v1.ServicePort) bool {
					dup := seen[p.Port]
					seen[p.Port] = true
					return dup
				})
			}),
		},
		{
			name: "claimed-node-port-less-gets-node-ports", want: "LB-CLAIMED-FEATURES", clause: "node-port-less listeners",
			reason: "NodePortless is claimed, but a Service without node ports gets listeners to node ports the provider makes up, instead of to the pods",
			b:      lbRewriteService(lbMadeUpNodePorts),
		},
		{
			name: "dual-stack-reports-ipv4-only", want: "LB-CLAIMED-FEATURES", clause: "an ingress per IP family for RequireDualStack",
			reason: "a dual-stack load balancer reports its IPv4 address only",
			b: lbRewriteStatus(func(st *v1.LoadBalancerStatus) {
				var keep []v1.LoadBalancerIngress
				for _, in := range st.Ingress {
					if a, err := netip.ParseAddr(in.IP); err != nil || a.Is4() {
						keep = append(keep, in)
					}
				}
				st.Ingress = keep
			}),
		},
	})
}

// clausesLBFeatures returns the clauses of the statements of the rules of this
// file, each quoted from its statement (see TestBrokenCoverage).
func clausesLBFeatures() map[string][]string {
	return map[string][]string{
		"LB-INGRESS-VALID":           {"a valid IP", "a DNS hostname", "that is not an IP", "a hostname alone only with Claims.HostnameIngress", "ipMode only with an IP"},
		"LB-SOURCE-RANGES":           {"Allowed sources are spec.loadBalancerSourceRanges", "else the valid annotation", "unclaimed, a restricting annotation is rejected, not opened to all", "else all of each IP family of the Service"},
		"LB-SOURCE-RANGES-MALFORMED": {"rejects a malformed source-range annotation with an error", "instead of opening the load balancer to all"},
		"LB-HEALTH-CHECK":            {"backends are checked on spec.healthCheckNodePort /healthz", "no longer on it once the Service is switched to Cluster"},
		"LB-HEALTH-CHECK-CLUSTER":    {"backends are checked on kube-proxy's 10256 /healthz"},
		"LB-UNSUPPORTED-REJECTED":    {"UDP", "SCTP", "mixed protocols", "no node ports", "spec source ranges"},
		"LB-DUAL-STACK-REJECTED":     {"returns an error for a RequireDualStack Service instead of serving it single-stack"},
		"LB-CLAIMED-FEATURES":        {"builds each claimed feature as asked", "protocols", "ports", "node-port-less listeners", "an ingress per IP family for RequireDualStack"},
	}
}

// lbRewriteService breaks EnsureLoadBalancer by building what f makes of a
// copy of the Service instead of the Service.
func lbRewriteService(f func(*v1.Service)) wrapped {
	return lbWrap(func(b *wrappedLB) {
		b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
			s = s.DeepCopy()
			f(s)
			return next.EnsureLoadBalancer(ctx, c, s, n)
		}
	})
}

// stripSourceRangesAnnotation ignores the source-range annotation of a
// Service without spec.loadBalancerSourceRanges: a valid one when valid, a
// malformed one otherwise.
func stripSourceRangesAnnotation(valid bool) wrapped {
	return lbRewriteService(func(s *v1.Service) {
		if annotated, err := lbRangesAnnotation(s); annotated && (err == nil) == valid {
			delete(s.Annotations, v1.AnnotationLoadBalancerSourceRangesKey)
		}
	})
}

// lbRangesAnnotation reports whether the source ranges of s are those of
// its source-range annotation (it has one, and no
// spec.loadBalancerSourceRanges), and upstream's error reading them
// (servicehelpers.GetLoadBalancerSourceRanges).
func lbRangesAnnotation(s *v1.Service) (annotated bool, err error) {
	_, ok := s.Annotations[v1.AnnotationLoadBalancerSourceRangesKey]
	_, err = servicehelpers.GetLoadBalancerSourceRanges(s)
	return ok && len(s.Spec.LoadBalancerSourceRanges) == 0, err
}

// lbRewriteStatus breaks EnsureLoadBalancer and GetLoadBalancer by applying
// f to a copy of every status they return.
func lbRewriteStatus(f func(*v1.LoadBalancerStatus)) wrapped {
	rewrite := func(st *v1.LoadBalancerStatus) *v1.LoadBalancerStatus {
		if st == nil {
			return nil
		}
		st = st.DeepCopy()
		f(st)
		return st
	}
	return lbWrap(func(b *wrappedLB) {
		b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
			st, err := next.EnsureLoadBalancer(ctx, c, s, n)
			return rewrite(st), err
		}
		b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
			st, ok, err := next.GetLoadBalancer(ctx, c, s)
			return rewrite(st), ok, err
		}
	})
}

// lbRewriteIngress is lbRewriteStatus applying f to every ingress.
func lbRewriteIngress(f func(*v1.LoadBalancerIngress)) wrapped {
	return lbRewriteStatus(func(st *v1.LoadBalancerStatus) {
		for i := range st.Ingress {
			f(&st.Ingress[i])
		}
	})
}

// lbIPToHostname replaces in's IP with a DNS name derived from it.
func lbIPToHostname(in *v1.LoadBalancerIngress) {
	if in.IP != "" {
		in.Hostname = "lb-" + strings.NewReplacer(".", "-", ":", "-").Replace(in.IP) + ".example.com"
		in.IP = ""
	}
}

// lbProtocolAs returns a Service rewrite that turns ports of protocol from
// into ports of protocol to.
func lbProtocolAs(from, to v1.Protocol) func(*v1.Service) {
	return func(s *v1.Service) {
		for i := range s.Spec.Ports {
			if s.Spec.Ports[i].Protocol == from {
				s.Spec.Ports[i].Protocol = to
			}
		}
	}
}

// lbMadeUpNodePorts gives every port without a node port one of its own.
func lbMadeUpNodePorts(s *v1.Service) {
	for i := range s.Spec.Ports {
		if s.Spec.Ports[i].NodePort == 0 {
			s.Spec.Ports[i].NodePort = 32700 + int32(i)
		}
	}
}

// lbFakeTargetWith returns a NewTarget like newFakeTarget whose cloud is
// built with opts.
func lbFakeTargetWith(opts fake.Options) func(context.Context) (*conformance.Target, error) {
	return func(context.Context) (*conformance.Target, error) {
		return fakeTarget(fakeCloudConfig(), opts)
	}
}

// kubeProxyHealthzPort is the port Desired probes for
// externalTrafficPolicy=Cluster: kube-proxy's (--healthz-bind-address
// default :10256), whose path a broken driver keeps.
const kubeProxyHealthzPort = 10256

// lbRootPath is what a driver that ignores the path of a health check on a
// node port configures: / instead of /healthz.
func lbRootPath(hc loadbalancer.HealthCheck) loadbalancer.HealthCheck {
	if hc.Port != kubeProxyHealthzPort && hc.Path == "/healthz" {
		hc.Path = "/"
	}
	return hc
}

// lbReportHealthzPath returns a copy of lb reporting the /healthz that
// lbRootPath replaced, as such a driver reports what it was asked for.
func lbReportHealthzPath(lb *loadbalancer.LoadBalancer) *loadbalancer.LoadBalancer {
	if lb == nil || lb.Spec.HealthCheck.Port == kubeProxyHealthzPort || lb.Spec.HealthCheck.Path != "/" {
		return lb
	}
	c := *lb
	c.Spec.HealthCheck.Path = "/healthz"
	return &c
}
