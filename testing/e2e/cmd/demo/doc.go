// Command demo shows ccmkit's example cloud-controller-manager at work: it
// starts a real etcd and kube-apiserver on loopback, the example CCM
// (example/main.go) running ccmkit's fake cloud in its realistic mode (load
// balancers provisioned asynchronously, a rate-limited API, backends kept by
// instance ID), registers a few Nodes the way kubelets with
// --cloud-provider=external do and creates LoadBalancer Services, prints
// what the CCM does as it happens — for each load balancer, its
// provisioning and the moment its Service gets the address, and the
// first Service's HTTPS listener (port 443, appProtocol https) with its
// certificate reference (the fake's fake.ccmkit.io/certificate) — then a
// summary table. Then two steps show ccmkit's housekeeping controllers:
// drift (a listener and a backend removed in the cloud behind the CCM's
// back, repaired by drift-repair) and an orphan (a load balancer tagged
// for the cluster whose Service is gone, deleted by orphan-collection
// after its grace period, while one without ccmkit's tags stays). It
// keeps running, with a kubeconfig for kubectl, until
// interrupted.
//
//	cd testing/e2e && go run ./cmd/demo
//
// The first run builds kube-apiserver and etcd from Go modules (minutes);
// later runs reuse them from testing/e2e/.cache. Flags:
//
//	-nodes N               Nodes (and cloud instances) to create (default 3)
//	-services N            LoadBalancer Services to create (default 2)
//	-exit-after-summary    stop everything and exit after the summary
//	-timeout D             how long to wait for convergence (default 2m)
//	-provisioning-delay D  how long a load balancer takes to provision (default 3s)
//	-dir PATH              keep everything (logs, kubeconfig) in PATH
//
// Everything it starts is stopped on exit, on Ctrl-C and on SIGTERM; the
// child processes also die with it if it is killed.
package main
