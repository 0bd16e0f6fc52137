package fake

import "github.com/ccmkit/ccmkit/annotation"

// The annotations the fake's provider declares (annotation.Set), one of
// every kind, as a provider declares its own: the Reconciler validates each
// one present on a Service before any cloud call, and copies those with
// Setting into the load balancer's Spec.Settings, which the fake keeps
// (LoadBalancer.Spec) and Plan keeps in sync. None has a Default, so a
// Service without them gets the load balancer it always had.
var (
	// annotations is the Set the load-balancer Reconciler is given
	// (loadbalancer.Options.Annotations).
	annotations = &annotation.Set{}

	// idAnnotation holds the ID of an existing load balancer to adopt
	// (loadbalancer.Options.IDAnnotation).
	idAnnotation = annotations.MustDeclare(annotation.Annotation{
		Name: "fake.ccmkit.io/load-balancer-id",
		Kind: annotation.KindString,
		Doc: "The ID of an existing load balancer of the fake cloud for this Service: the Reconciler looks it up first, " +
			"and adopts it when it has no ccmkit ownership tags (see package loadbalancer, \"Lookup order, rename and adoption\").",
	})
	// requestedIPAnnotation requests the load balancer's address
	// (loadbalancer.Options.RequestedIPAnnotation), as spec.loadBalancerIP
	// does; the fake allocates it when it is free.
	requestedIPAnnotation = annotations.MustDeclare(annotation.Annotation{
		Name: "fake.ccmkit.io/requested-ip",
		Kind: annotation.KindIP,
		Doc: "The address the load balancer should have, of one of the Service's IP families; " +
			"it must agree with spec.loadBalancerIP when both are set. A Cloud whose capabilities leave out RequestedIP refuses it.",
	})
)

// healthCheckAnnotation gives a port's listener pool a health check of its
// own (loadbalancer.Options.HealthCheckAnnotation): on a hierarchical
// cloud, whose pools have a health monitor each; elsewhere a Service that
// sets it is refused.
var healthCheckAnnotation = annotations.MustDeclare(annotation.Annotation{
	Name: "fake.ccmkit.io/health-check", Kind: annotation.KindString, PerPort: true,
	Doc: "The health check of each listed port's pool, on the port's node port: \"tcp\" (a TCP connect) or \"http:\" and a path " +
		"(an HTTP GET, such as \"http:/ready\"); a port not listed keeps the Service's. Hierarchical clouds only (a health monitor per pool).",
})

// appProtocolAnnotation gives a port's application protocol
// (loadbalancer.Options.AppProtocolAnnotation), as
// spec.ports[].appProtocol does, for tools that cannot set that field.
var appProtocolAnnotation = annotations.MustDeclare(annotation.Annotation{
	Name: "fake.ccmkit.io/protocol", Kind: annotation.KindEnum, PerPort: true, Values: []string{"http", "https", "kubernetes.io/h2c"},
	Doc: "The application protocol of each listed port, as spec.ports[].appProtocol gives it (they must agree when both are set); " +
		"a port not listed is its Protocol, or its appProtocol.",
})

// The fake's annotations all live under fake.ccmkit.io/, a prefix no other
// provider uses: the Set claims it (annotation.Set.ClaimPrefix), so that
// the Reconciler refuses a Service with a misspelt or wrongly cased one
// ("fake.ccmkit.io/helth-check"), naming the annotation it most likely
// means, instead of ignoring it.
func init() { annotations.MustClaimPrefix("fake.ccmkit.io/") }

// The provider settings: Setting annotations, copied into Spec.Settings.
// The fake has no behaviour behind them; they are kept, reported and
// planned like a real cloud's load-balancer options.
func init() {
	for _, a := range []annotation.Annotation{
		{Name: "fake.ccmkit.io/idle-timeout", Kind: annotation.KindDuration, Setting: true,
			Doc: "How long an idle connection stays open, as a Go duration such as \"60s\"."},
		{Name: "fake.ccmkit.io/proxy-protocol", Kind: annotation.KindBool, Setting: true,
			Doc: "Whether the load balancer sends the PROXY protocol header to backends."},
		{Name: "fake.ccmkit.io/algorithm", Kind: annotation.KindEnum, Values: []string{"round-robin", "least-connections"}, Setting: true,
			Doc: "How connections are spread over backends."},
		{Name: "fake.ccmkit.io/connection-limit", Kind: annotation.KindInt, Min: 1, Max: 100000, Setting: true,
			Doc: "The most connections the load balancer accepts at once, per listener."},
		{Name: "fake.ccmkit.io/health-check-source-ranges", Kind: annotation.KindCIDRList, Setting: true,
			Doc: "The networks the load balancer's health checks come from, for the backends' firewalls."},
		// Per port: copied into each listener's Settings.
		{Name: "fake.ccmkit.io/certificate", Kind: annotation.KindString, PerPort: true, Setting: true,
			Doc: "A reference to the TLS certificate a listed port presents (an https port terminates TLS with it)."},
		{Name: "fake.ccmkit.io/proxy-protocol-ports", Kind: annotation.KindBool, PerPort: true, Setting: true,
			Doc: "Whether each listed port's listener sends the PROXY protocol header to backends."},
		{Name: "fake.ccmkit.io/https-redirect", Kind: annotation.KindBool, PerPort: true, Setting: true,
			Doc: "Whether each listed port's listener answers every HTTP request with a redirect to HTTPS (an http port in front of an https one)."},
	} {
		annotations.MustDeclare(a)
	}
}
