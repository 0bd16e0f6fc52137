// Package workload builds the Kubernetes objects the e2e scenarios, the demo
// and the benchmark create (Nodes as a kubelet with --cloud-provider=external
// registers them, LoadBalancer Services) and waits for the CCM to act on
// them, with failure messages that say what was awaited, for how long, and
// what was seen last.
//
// It talks to the API server only; what the cloud holds is the business of
// package fakecloud.
package workload
