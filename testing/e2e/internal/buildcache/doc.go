// Package buildcache builds the e2e module's helper binaries (etcd,
// kube-apiserver and the example CCM) with the go command and keeps the slow
// ones in a cache directory so that they are built once per machine.
//
// The cache directory is $CCMKIT_E2E_CACHE when set, otherwise
// testing/e2e/.cache in the source tree (git-ignored). Tools under
// testing/e2e/tools/<name> are cached under bin/<name>-<key>, where key hashes
// the tool's go.mod, go.sum and main.go and the Go version, so a version bump
// gives a new file and an unchanged tool is never rebuilt. Concurrent test
// binaries building the same tool serialise on a file lock; the loser finds
// the winner's binary.
package buildcache
