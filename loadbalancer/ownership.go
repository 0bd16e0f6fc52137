package loadbalancer

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The ownership tags ccmkit puts on every load balancer it creates or
// adopts. TagCluster and TagServiceUID are the identity; TagService is for
// people. A Driver for a cloud with restricted tag syntax maps these keys
// and values to its own syntax and back, losslessly.
const (
	// TagCluster holds the cluster identity (see the package doc).
	TagCluster = "ccmkit.io/cluster"
	// TagServiceUID holds the Service's metadata.uid.
	TagServiceUID = "ccmkit.io/service-uid"
	// TagService holds "namespace/name" of the Service, for people.
	TagService = "ccmkit.io/service"
)

// Owner is who a load balancer belongs to: a cluster and a Service.
// Cluster and UID are the identity; Namespace and Name are informative.
type Owner struct {
	Cluster   string
	UID       types.UID
	Namespace string
	Name      string
}

// OwnerOf returns the owner of svc's load balancer in cluster. svc is only
// read.
func OwnerOf(cluster string, svc *v1.Service) Owner {
	return Owner{Cluster: cluster, UID: svc.UID, Namespace: svc.Namespace, Name: svc.Name}
}

// namespacedName returns "namespace/name".
func (o Owner) namespacedName() string { return o.Namespace + "/" + o.Name }

// tags returns the ownership tags of o (a new map): those of a desired
// model (see LoadBalancer.Tags).
func (o Owner) tags() map[string]string {
	return map[string]string{
		TagCluster:    o.Cluster,
		TagServiceUID: string(o.UID),
		TagService:    o.namespacedName(),
	}
}

// Selector returns the tags that identify o's load balancers (cluster and
// Service UID), for Query.Tags.
func (o Owner) Selector() map[string]string {
	return map[string]string{TagCluster: o.Cluster, TagServiceUID: string(o.UID)}
}

// Owns reports whether tags mark a load balancer as o's: the cluster and
// Service UID tags are present and equal o's. An empty o.Cluster or o.UID
// owns nothing.
func (o Owner) Owns(tags map[string]string) bool {
	return o.Cluster != "" && o.UID != "" &&
		tags[TagCluster] == o.Cluster && tags[TagServiceUID] == string(o.UID)
}

// OwnerFromTags returns the owner recorded in tags, and false when tags
// carry no ccmkit ownership (neither TagCluster nor TagServiceUID).
func OwnerFromTags(tags map[string]string) (Owner, bool) {
	c, okc := tags[TagCluster]
	u, oku := tags[TagServiceUID]
	if !okc && !oku {
		return Owner{}, false
	}
	o := Owner{Cluster: c, UID: types.UID(u)}
	if ns, name, ok := strings.Cut(tags[TagService], "/"); ok {
		o.Namespace, o.Name = ns, name
	}
	return o, true
}
