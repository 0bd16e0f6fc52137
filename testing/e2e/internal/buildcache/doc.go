// Package buildcache builds the e2e module's helper binaries (etcd,
// kube-apiserver and the example CCM) with the go command and keeps the slow
// ones in a cache directory so that they are built once per machine.
//
// The cache directory is $CCMKIT_E2E_CACHE when set, otherwise
// testing/e2e/.cache in the source tree (git-ignored). The tools are the
// commands testing/e2e/tools/<name> of one module, testing/e2e/tools, built
// together in one go build and cached under bin/<name>-<key>, where key hashes
// the module's go.mod and go.sum, every tool's main.go and the Go version, so
// a version bump gives new files and unchanged tools are never rebuilt.
// Concurrent test binaries building the tools serialise on one file lock; the
// loser finds the winner's binaries.
package buildcache
