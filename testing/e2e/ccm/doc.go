// Package ccm builds and runs ccmkit's example cloud-controller-manager
// (example/main.go in the root module, built with the testing/e2e module's
// dependency versions; see Build) as a separate process against a real
// API server, the way a cluster runs it: flags, a kubeconfig, a
// cloud-config file, leader election through a Lease.
//
// It knows the upstream flags of k8s.io/cloud-provider v0.37.2 (options
// package: KubeCloudShared, NodeLifecycleController, ServiceController,
// SecureServing, and the leader-election flags of k8s.io/component-base) and
// nothing of the cloud behind the binary: the cloud-config file is the
// caller's.
//
// Linux only.
package ccm
