// Package controlplane runs a real etcd and kube-apiserver on 127.0.0.1 for
// ccmkit's e2e tests, the demo and the benchmark: no Docker, no cloud, no
// download site.
//
// Both servers are built from one tool module, testing/e2e/tools (a
// command per server, one go.mod so that the packages they share are
// resolved to one version and compiled once; a module apart from the e2e
// module, so that k8s.io/kubernetes and the etcd server never reach its
// dependency graph), in one go build, into a cache directory, once per
// machine. Start picks free ports at run time, generates a CA, a serving
// certificate, service-account keys and an admin token, turns RBAC on,
// waits for /readyz and writes an admin kubeconfig. Stop stops every
// process it started; the children also die with the parent process
// (PR_SET_PDEATHSIG), so an interrupted test run
// leaves nothing behind.
//
// What it is not: a cluster. There is no kube-controller-manager, scheduler
// or kubelet, so namespaces are never finalized, Pods never run and Nodes
// are whatever the caller creates. The cloud-controller-manager under test
// is the only controller.
//
// Linux only.
package controlplane
