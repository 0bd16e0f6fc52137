package loadbalancer_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

func TestOwnership(t *testing.T) {
	o := loadbalancer.OwnerOf("c1", lbService())
	tags := loadbalancer.OwnerTags(o)
	if diff := cmp.Diff(ownerTags, tags); diff != "" {
		t.Errorf("Tags (-want +got):\n%s", diff)
	}
	cases := []struct {
		name, reason string
		tags         map[string]string
		want         bool
	}{
		{"own", "cluster and UID match", tags, true},
		{"extra tags", "other tags do not matter", map[string]string{loadbalancer.TagCluster: "c1", loadbalancer.TagServiceUID: "uid-web", "team": "x"}, true},
		{"other cluster", "same Service UID in another cluster is not ours", map[string]string{loadbalancer.TagCluster: "c2", loadbalancer.TagServiceUID: "uid-web"}, false},
		{"other service", "same cluster, another UID (re-created Service)", map[string]string{loadbalancer.TagCluster: "c1", loadbalancer.TagServiceUID: "uid-2"}, false},
		{"name only", "namespace/name is informative, not identity", map[string]string{loadbalancer.TagService: "shop/web"}, false},
		{"untagged", "nothing", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := o.Owns(tc.tags); got != tc.want {
				t.Errorf("%s: Owns(%v) = %v; want %v", tc.reason, tc.tags, got, tc.want)
			}
		})
	}
	if (loadbalancer.Owner{}).Owns(map[string]string{loadbalancer.TagCluster: "", loadbalancer.TagServiceUID: ""}) {
		t.Errorf("the zero Owner owns empty tags; want it to own nothing")
	}
	got, ok := loadbalancer.OwnerFromTags(tags)
	if !ok || got != o {
		t.Errorf("OwnerFromTags(%v) = %+v, %v; want %+v, true", tags, got, ok, o)
	}
	if _, ok := loadbalancer.OwnerFromTags(map[string]string{"team": "x"}); ok {
		t.Errorf("OwnerFromTags(untagged) reported an owner")
	}
	if diff := cmp.Diff(map[string]string{loadbalancer.TagCluster: "c1", loadbalancer.TagServiceUID: "uid-web"}, o.Selector()); diff != "" {
		t.Errorf("Selector (-want +got):\n%s", diff)
	}
}
