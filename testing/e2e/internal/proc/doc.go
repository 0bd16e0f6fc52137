// Package proc starts and stops the long-running child processes of the e2e
// tests and the demo (etcd, kube-apiserver, the example CCM) so that none of
// them outlives its owner.
//
// Every child runs in a process group of its own and gets SIGKILL from the
// kernel when the parent dies (Linux PR_SET_PDEATHSIG), so a test binary that
// is killed by `go test -timeout` or a demo that is interrupted leaves nothing
// behind. Stop sends SIGTERM to the whole group, waits a grace period, then
// sends SIGKILL and reaps the child.
//
// The package is Linux-only, like the rest of the e2e module.
package proc
