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
//
// # Credentials and what is safe to print
//
// Declare every credential of a cloud-config as a Secret. DecodeConfig's
// errors never quote a value of the input (a YAML syntax error gives the
// line and the kind of mistake, a wrong type the field path), so a
// credential cannot leak through them, and a decoded configuration can be
// printed by anything: a Secret keeps its text sealed, out of reach of
// reflection, and shows "[redacted]" with fmt (every verb, at any depth,
// exported field or not), encoding/json, encoding/xml, the YAML encoders,
// log/slog and klog; go-spew and dump.Pretty, which bypass methods, show
// only the sealed bytes. What remains to keep out of logs is the string
// Reveal returns. See Secret.
//
// Provider IDs are parsed strictly (see Codec): no "." or ".." segments,
// queries, fragments, percent-escapes, backslashes, invisible or
// bidirectional Unicode characters, so an ID can be joined into a URL or a
// path and shown to a reader as it is.
package provider
