// Package nodelabel is the one check of the labels a cloud gives a Node
// (an instance's labels, its type, zone and region), shared by the
// instances Adapter, which refuses them from a Driver, the fake, which
// refuses them in its cloud-config, and the conformance suite.
package nodelabel

import (
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// kubernetesNamespace matches label keys in the kubernetes.io and k8s.io
// namespaces: it is the expression getNodeModifiersFromCloudProvider
// (k8s.io/cloud-provider controllers/node/node_controller.go) uses to
// discard such labels from InstanceMetadata.AdditionalLabels.
var kubernetesNamespace = regexp.MustCompile(`(^|\.)(kubernetes|k8s)\.io/`)

// KeyProblem returns "" when key is a label key the node controller puts
// on a Node, and otherwise what was expected, for a message of the form
// `label key "k": <problem>`.
func KeyProblem(key string) string {
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return "expected a qualified name: " + strings.Join(msgs, "; ")
	}
	if kubernetesNamespace.MatchString(key) {
		return "expected a key outside the kubernetes.io and k8s.io namespaces, which the node controller discards"
	}
	return ""
}

// ValueProblem returns "" when value is a valid label value (an instance
// label's value, or its type, zone or region), and otherwise what was
// expected.
func ValueProblem(value string) string {
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		return "expected a valid label value: " + strings.Join(msgs, "; ")
	}
	return ""
}
