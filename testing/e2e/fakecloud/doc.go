// Package fakecloud is the e2e side of ccmkit's fake cloud (package fake)
// running inside a cloud-controller-manager process: it writes the fake's
// cloud-config, and it reads and changes the cloud's state from outside the
// process through the fake's loopback admin HTTP endpoint (documented in the
// fake package).
//
// The types are the fake's own (fake.Config, fake.State, fake.Instance, ...);
// this package adds no model of its own.
package fakecloud
