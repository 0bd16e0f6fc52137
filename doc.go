// Package ccmkit is a library of building blocks for writing a Kubernetes
// cloud-controller-manager (CCM): the cloudprovider.Interface implementation
// that lets the upstream node, node-lifecycle, service and route controllers
// of k8s.io/cloud-provider manage load balancers, nodes and routes on your
// own cloud.
//
// The root package holds no code; it is the map. Each building block is a
// package you compose into your provider, each is usable alone, and the fake
// package shows them all composed into a complete, stateful cloud.
//
// # Getting Started
//
// Copy example/main.go into your repository as the main of your CCM. Write a
// provider package whose init registers your cloud under a name, with a
// typed cloud-config:
//
//	func init() {
//		if err := provider.Register("acme", NewAcme); err != nil {
//			panic(err)
//		}
//	}
//
//	func NewAcme(cfg *Config) (cloudprovider.Interface, error) {
//		api := acmesdk.Dial(cfg.Endpoint, cfg.Token.Reveal())
//		cache, err := instances.NewCache(vmDriver{api}, instances.CacheOptions{})
//		...
//		nodes, err := instances.NewAdapter(cache, provider.Codec{Scheme: "acme"}, instances.Options{})
//		...
//		lbCache, err := loadbalancer.NewCache(lbDriver{api}, loadbalancer.CacheOptions{})
//		...
//		lbs, err := loadbalancer.NewReconciler(lbCache, loadbalancer.Options{ClusterID: cfg.ClusterID,
//			Instances: nodes, Codec: provider.Codec{Scheme: "acme"},
//			Capabilities: loadbalancer.Capabilities{BackendKey: loadbalancer.BackendKeyProviderID}})
//		...
//		table, err := routes.NewWholeTable(routeDriver{api}, routes.Options{ClusterID: cfg.ClusterID})
//		...
//		return provider.New("acme", provider.Options{ClusterID: cfg.ClusterID,
//			LoadBalancer: lbs, InstancesV2: nodes, Routes: table,
//		})
//	}
//
// Each capability is a small Driver interface of two or three methods that
// call your cloud's API; ccmkit turns it into the full upstream interface and
// keeps the contracts the controllers rely on. Example_yourOwnProvider in
// this package is the complete version, compiled and run. Then run the
// conformance suite (testing/conformance) against your provider in go test.
//
// # Packages
//
// provider: the registrable skeleton. provider.New composes optional
// capabilities into a cloudprovider.Interface, counting typed nils as absent;
// provider.Register registers it under a name with a strictly decoded,
// validated, typed cloud-config; provider.Codec formats and parses provider
// IDs; provider.Secret keeps credentials out of logs.
//
// loadbalancer: naming and ownership tags for cloud load balancers, the
// provider-neutral desired state of a load balancer, Plan (desired versus
// actual, as the fewest cloud actions), and a Reconciler that implements
// cloudprovider.LoadBalancer over a small Driver, with a validated status.
//
// annotation: typed Service annotations, declared once, parsed strictly,
// with a generated Markdown reference.
//
// admission: a ValidatingAdmissionPolicy generated from a provider's
// declared annotations and load-balancer capabilities, so that the
// apiserver refuses a Service the Reconciler would, with its message.
//
// routes: route naming per (node, CIDR), a pure differ between desired and
// actual route tables, and a Table that implements cloudprovider.Routes over
// a per-route or a whole-table driver, coalescing concurrent calls into one
// table write.
//
// instances: canonical node addresses, and an adapter that implements
// cloudprovider.InstancesV2 over a small Driver, with an optional list-based
// cache so that one cloud call serves every node in a sync period.
//
// governor: a client-side budget of cloud calls shared by a provider's
// Drivers, with priorities, the cloud's Retry-After honoured, and
// refusals the controllers retry instead of blocked workers.
//
// housekeeping: the drift-repair and orphan-collection controllers, which
// a CCM main registers next to the upstream ones: load balancers changed in
// the cloud behind the CCM's back are repaired within a period, and those
// whose Service is gone are deleted after a grace period.
//
// fake: an in-memory, stateful fake cloud composed from the packages above,
// with fault injection and per-operation call counters. It backs the
// examples, the tests and the demo, and is the reference composition. Its
// process machinery is apart: fake/statefile (one cloud shared by
// processes through a file), fake/admin (the HTTP admin endpoint) and
// fake/register (the provider "fake", with both).
//
// testing/conformance: the shared conformance suite: rules from the
// upstream controllers' contracts, checked by direct calls and by running the
// real upstream controllers against a fake clientset.
//
// testing/scale: the scale simulator: the upstream controllers against a
// fake clientset and any provider, through scripted scenarios, counting
// the cloud calls by capability and operation against each scenario's
// minimum.
//
// testing/e2e (a nested module): a real etcd and kube-apiserver on loopback,
// the example CCM against them, and the demo.
//
// testing/gce (a nested module): the conformance suite on Google's GCE
// provider over its own compute mock, every rule's outcome pinned and
// explained.
//
// example: the CCM main to copy, and example/deploy with its manifests.
package ccmkit
