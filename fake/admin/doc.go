// Package admin is the fake cloud's HTTP admin endpoint: Handler serves
// the admin API of a fake.Cloud (its state, its instances, console edits
// of its load balancers, call counters, injected faults, the rate limit
// and the provisioning delay; Handler documents every route), and Cloud is
// a fake.Cloud that serves it on the cloud-config's admin.address
// (fake.Config.Admin) from Initialize until Shutdown. The registered
// provider "fake" (package fake/register) builds a Cloud when the
// cloud-config sets admin.address; the e2e suite and the demo drive the
// example CCM through it.
//
// It is process machinery for tests and demos, built only on the fake's
// exported control surface (fake.Cloud's methods and their …Context
// forms, fake.Fault, the error kinds fake.ErrInvalid, fake.ErrNotFound and
// fake.ErrConflict); it is not part of the cloud model, and not a model of
// any real cloud's API. It has no authentication: it listens on loopback
// addresses only and refuses the requests a web page could make.
package admin
