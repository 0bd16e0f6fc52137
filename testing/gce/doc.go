// Package gce runs ccmkit's conformance suite (testing/conformance) against
// Google's GCE cloud provider, k8s.io/cloud-provider-gcp/providers@v0.28.2
// package gce, over its stateful compute mock (gce.NewFakeGCECloud). It is
// a measurement of the suite on a real, independently written provider,
// not a test of ccmkit's blocks: TestGCE pins each rule's outcome and the
// README explains every failure and skip from GCE's code.
//
// The module github.com/ccmkit/ccmkit/testing/gce is nested so that the
// GCE provider and the Google API client never reach library users.
//
//	cd testing/gce && go test -race -count=1 -run TestGCE -v .
//
// The package itself has no API: its tests are the point, and count.go's
// helpers wrap the mock's hook fields generically.
package gce
