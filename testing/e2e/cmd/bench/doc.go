// Command bench measures how long the example cloud-controller-manager,
// running ccmkit's fake cloud against a real kube-apiserver on loopback,
// takes to initialize N Nodes and to give M LoadBalancer Services an
// ingress, all created at once:
//
//	cd testing/e2e && go run ./cmd/bench -nodes 100 -services 100 -runs 3
//
// Each run starts a fresh CCM (and so a fresh fake cloud) on one shared
// control plane, waits until it runs its controllers, then creates the
// Nodes (as kubelets with --cloud-provider=external register them) and the
// Services concurrently and polls the API server every 100ms until every
// Node is initialized (providerID, addresses, taint removed) and every
// Service has an ingress. The clock starts before the first create. The CCM
// runs with the upstream defaults for workers and client QPS unless the
// flags below say otherwise, so the figure is what a user gets out of the
// box. Wall time on a shared machine varies: use -runs and read the median.
package main
