package gce

import (
	"reflect"

	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	gcp "k8s.io/cloud-provider-gcp/providers/gce"
)

// TEMPORARY (issue 26): remove when the suite serves a RESTClient.
//
// skipClusterIDWatch is the fake GCE cloud whose Initialize does what
// GCE's does (gce.go Initialize: the Kubernetes client and an event
// recorder) but for starting watchClusterID. The suite initializes every
// provider against a client-go fake clientset, whose CoreV1().RESTClient()
// is nil, and watchClusterID's list-watch (gce_clusterid.go) dereferences
// it in a goroutine: the panic ends the test binary. Without the watcher
// the fake keeps its preset cluster ID (gce_fake.go fakeClusterID). The
// event recorder is a record.FakeRecorder, as GCE's own test fake has
// (gce_util.go fakeGCECloud); a nil one makes GCE's mixed-protocol
// rejection panic (gce_loadbalancer.go EnsureLoadBalancer).
//
// To remove: delete this file and set Target.Cloud to the *gce.Cloud
// itself in newTarget (the line marked TEMPORARY there).
type skipClusterIDWatch struct{ *gcp.Cloud }

func (c skipClusterIDWatch) Initialize(b cloudprovider.ControllerClientBuilder, _ <-chan struct{}) {
	for name, v := range map[string]any{"clientBuilder": b, "client": b.ClientOrDie("cloud-provider"), "eventRecorder": &record.FakeRecorder{}} {
		f, err := unexported(c.Cloud, name)
		if err != nil {
			panic(err)
		}
		f.Set(reflect.ValueOf(v))
	}
}
