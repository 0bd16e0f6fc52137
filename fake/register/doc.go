// Package register registers the fake cloud (package fake) as the cloud
// provider "fake": a blank import makes --cloud-provider=fake
// --cloud-config=<file> available to a cloud-controller-manager, the file
// being a fake.Config (example/cloud-config.yaml is its annotated
// sample). It is the one place that composes the fake with its process
// machinery: the shared state file (stateFile) and the admin endpoint
// (admin.address, package fake/admin). A registration error (the name
// "fake" taken by another package) is logged, and the binary then reports
// "fake" as not registered.
//
// It is not needed to build the fake in a test: fake.New does, and
// admin.New adds the admin endpoint.
package register
