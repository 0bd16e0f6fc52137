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
// printed: a Secret shows "[redacted]" with fmt (every verb, also nested in
// exported fields of structs, pointers, slices and maps), encoding/json,
// sigs.k8s.io/yaml, go.yaml.in/yaml/v2 and v3, encoding/xml, log/slog and
// klog (text and JSON formats). It is not safe to print a Secret held in an
// unexported struct field (fmt prints that raw), the string from Reveal or
// string(s), or a configuration through a printer that bypasses methods by
// reflection (go-spew with DisableMethods, encoding/gob). See Secret.
//
// Provider IDs are parsed strictly (see Codec): no "." or ".." segments,
// queries, fragments, percent-escapes, backslashes, invisible or
// bidirectional Unicode characters, so an ID can be joined into a URL or a
// path and shown to a reader as it is.
package provider
