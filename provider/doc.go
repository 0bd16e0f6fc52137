// Package provider is the registrable skeleton of a cloud provider: it
// composes optional capabilities (LoadBalancer, InstancesV2, legacy
// Instances, Zones, Clusters, Routes) into a cloudprovider.Interface,
// registers a provider under a name with a strictly decoded, validated and
// typed cloud-config, and formats and parses provider IDs.
//
// It is not where the capabilities themselves live: see the loadbalancer,
// routes and instances packages for building blocks that implement them, and
// the fake package for a complete provider composed with this one.
//
// The accessor contract of k8s.io/cloud-provider (cloud.go, Interface) is
// that each accessor returns (impl, true) or (nil, false); Cloud enforces it,
// counting a typed-nil capability as absent, because the node-lifecycle
// controller panics on (nil, true).
package provider
