// Package e2e holds ccmkit's end-to-end scenarios: the example
// cloud-controller-manager (example/main.go, running the fake cloud) against
// a real etcd and kube-apiserver on loopback. The scenarios are the package's
// tests; the package itself has no API.
//
// The module github.com/ccmkit/ccmkit/testing/e2e is nested so that its
// heavy, test-only dependencies never reach library users. etcd and
// kube-apiserver are built from one module of their own, tools/ (see package
// controlplane), the CCM from the checked-out root module's sources (package
// ccm). The three builds resolve every module they share to one version
// (TestSharedVersions in internal/buildcache), so a cold build compiles
// Kubernetes' libraries once for all of them.
//
// Run everything (the first run builds kube-apiserver, which takes minutes):
//
//	cd testing/e2e && go test -race -count=1 -timeout 40m ./...
//
// -short skips everything that starts a server. The demo is
// `cd testing/e2e && go run ./cmd/demo`; the benchmark is
// `cd testing/e2e && go run ./cmd/bench`.
//
// One control plane is shared by all scenarios of a test binary (TestMain);
// each scenario starts its own CCM process(es) and fake cloud, and uses its
// own namespace, node names and leader-election Lease, deleting its Nodes and
// Services when it ends. The leader-election and restart scenarios keep
// their cloud in the fake's shared state file (fake.Config.StateFile), so
// that, as with a real cloud, the replicas share one cloud and a restarted
// CCM finds what the killed one left; the test reads that cloud directly
// too (fakecloud.Shared). The foreign load balancer those scenarios must
// never touch belongs to another cluster over the same cloud
// (fake.NewPeer) that keeps the same --cluster-name: the cluster ID, not
// the cluster name, keeps them apart. TestRealisticCloudAtScale runs the
// fake as real clouds behave — load balancers provisioned asynchronously, a
// throttled API, backends kept by instance ID — with 100 Nodes named unlike
// their instances and 50 LoadBalancer Services. TestHierarchicalCloudAtScale
// runs it keeping each load balancer as a tree of objects, as OpenStack
// Octavia does (fake.LoadBalancerSection.Hierarchical: per port a listener,
// a pool, its members and a health monitor, each one write, the load
// balancer busy after each write): 50 Services of an http and an https
// port with a certificate reference, a port change and a certificate
// change on 10 of them at once and on one alone, each timed per Service,
// and the cloud's writes counted by operation against the fewest each
// change needs.
//
// Linux only (process groups and PR_SET_PDEATHSIG make sure no child
// outlives the test binary).
package e2e
