package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side-apply field manager of ApplyManifests.
const FieldManager = "ccmkit-e2e"

// ReadManifests parses every YAML document of every *.yaml and *.yml file in
// dir (sorted by file name, not recursive) into unstructured objects,
// skipping empty documents. Errors name the file and the document number.
func ReadManifests(dir string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	slices.Sort(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("workload: no *.yaml or *.yml files in %s", dir)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("workload: %w", err)
		}
		objs, err := DecodeManifests(b)
		if err != nil {
			return nil, fmt.Errorf("workload: %s: %w", f, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// DecodeManifests parses a multi-document YAML (or JSON) stream into
// unstructured objects, skipping empty documents. Each object must have
// apiVersion, kind and metadata.name.
func DecodeManifests(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d: apiVersion %q, kind %q, metadata.name %q: want all three set", doc, u.GetAPIVersion(), u.GetKind(), u.GetName())
		}
		out = append(out, u)
	}
}

// ApplyManifests creates or updates objs on the API server with server-side
// apply (field manager FieldManager, forced), in order, resolving kinds to
// resources through discovery. It returns "kind namespace/name" for each
// applied object, or the first error, naming the object.
func ApplyManifests(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) ([]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	var applied []string
	force := true
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		id := fmt.Sprintf("%s %s/%s", gvk.Kind, u.GetNamespace(), u.GetName())
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return applied, fmt.Errorf("workload: applying %s: %w", id, err)
		}
		body, err := u.MarshalJSON()
		if err != nil {
			return applied, fmt.Errorf("workload: applying %s: %w", id, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := u.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
			return applied, fmt.Errorf("workload: applying %s: %w", id, err)
		}
		applied = append(applied, id)
	}
	return applied, nil
}
