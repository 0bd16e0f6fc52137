// Package controlplane runs a real etcd and kube-apiserver on 127.0.0.1 for
// ccmkit's e2e tests, the demo and the benchmark: no Docker, no cloud, no
// download site.
//
// Both servers are built from Go modules (testing/e2e/tools/etcd and
// testing/e2e/tools/kube-apiserver, each a module of its own so that
// k8s.io/kubernetes and etcd never reach the e2e module's dependency graph)
// into a cache directory, once per machine. Start picks free ports at run
// time, generates a CA, a serving certificate, service-account keys and an
// admin token, turns RBAC on, waits for /readyz and writes an admin
// kubeconfig. Stop stops every process it started; the children also die
// with the parent process (PR_SET_PDEATHSIG), so an interrupted test run
// leaves nothing behind.
//
// What it is not: a cluster. There is no kube-controller-manager, scheduler
// or kubelet, so namespaces are never finalized, Pods never run and Nodes
// are whatever the caller creates. The cloud-controller-manager under test
// is the only controller.
//
// Linux only.
package controlplane
