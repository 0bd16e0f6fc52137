package housekeeping

import (
	"context"
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	upstreamfake "k8s.io/cloud-provider/fake"
	genericapp "k8s.io/controller-manager/app"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/provider"
)

// clients is a ControllerClientBuilder handing out one fake clientset.
type clients struct{ c kubernetes.Interface }

func (b clients) Config(string) (*restclient.Config, error)   { return &restclient.Config{}, nil }
func (b clients) ConfigOrDie(string) *restclient.Config       { return &restclient.Config{} }
func (b clients) Client(string) (kubernetes.Interface, error) { return b.c, nil }
func (b clients) ClientOrDie(string) kubernetes.Interface     { return b.c }

// TestControllerEntries: the controller-map entries start their
// controller over a ccmkit provider, and skip it, without an error (the
// CCM goes on with the others), over a cloud without load balancers, over
// load balancers that are not ccmkit's (no Repairer, no Owners), and, for
// orphan collection, over a cloud without a cluster ID.
func TestControllerEntries(t *testing.T) {
	withID, err := fake.New(fake.Config{ClusterID: "c"}, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	withoutID, err := fake.New(fake.Config{}, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	noLB, err := provider.New("bare", provider.Options{ClusterID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	foreign := &upstreamfake.Cloud{}
	entries := map[string]app.ControllerInitFuncConstructor{
		DriftRepairName:      NewDriftRepairController(&DriftRepairOptions{}),
		OrphanCollectionName: NewOrphanCollectionController(&OrphanCollectorOptions{}),
	}
	for _, tc := range []struct {
		name, reason string
		cloud        cloudprovider.Interface
		want         map[string]bool // controller → started
	}{
		{name: "ccmkit provider", reason: "both start", cloud: withID, want: map[string]bool{DriftRepairName: true, OrphanCollectionName: true}},
		{name: "no cluster ID", reason: "orphan collection would take another cluster's load balancers for orphans", cloud: withoutID,
			want: map[string]bool{DriftRepairName: true, OrphanCollectionName: false}},
		{name: "no load balancers", reason: "nothing to keep", cloud: noLB, want: map[string]bool{DriftRepairName: false, OrphanCollectionName: false}},
		{name: "not ccmkit's", reason: "no Repairer, no Owners", cloud: foreign, want: map[string]bool{DriftRepairName: false, OrphanCollectionName: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := k8sfake.NewClientset()
			cfg := (&config.Config{ClientBuilder: clients{client}, SharedInformers: informers.NewSharedInformerFactory(client, 0)}).Complete()
			cfg.ComponentConfig.KubeCloudShared.ClusterName = "kubernetes"
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			for name, e := range entries {
				ctrl, started, err := e.Constructor(e.InitContext, cfg, tc.cloud)(ctx, genericapp.ControllerContext{})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if started != tc.want[name] || (started && ctrl.Name() != name) {
					t.Errorf("%s started %v, want %v (%s)", name, started, tc.want[name], tc.reason)
				}
			}
		})
	}
}

// TestControllerEntriesNilOptions: a nil options pointer is every default,
// not a panic when the CCM starts the controller.
func TestControllerEntriesNilOptions(t *testing.T) {
	cloud, err := fake.New(fake.Config{ClusterID: "c"}, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]app.ControllerInitFuncConstructor{
		DriftRepairName:      NewDriftRepairController(nil),
		OrphanCollectionName: NewOrphanCollectionController(nil),
	}
	client := k8sfake.NewClientset()
	cfg := (&config.Config{ClientBuilder: clients{client}, SharedInformers: informers.NewSharedInformerFactory(client, 0)}).Complete()
	cfg.ComponentConfig.KubeCloudShared.ClusterName = "kubernetes"
	for name, e := range entries {
		ctrl, started, err := e.Constructor(e.InitContext, cfg, cloud)(t.Context(), genericapp.ControllerContext{})
		if err != nil || !started || ctrl.Name() != name {
			t.Errorf("%s with nil options: started %v, error %v; want it started with the defaults", name, started, err)
		}
	}
}
