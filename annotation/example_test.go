package annotation_test

import (
	"fmt"
	"os"

	"github.com/ccmkit/ccmkit/annotation"
)

// ExampleSet declares a provider's annotations, parses them
// strictly and writes the Markdown reference.
func ExampleSet() {
	var set annotation.Set
	algorithm := set.MustDeclare(annotation.Annotation{
		Name:    "lb.example.com/algorithm",
		Kind:    annotation.KindEnum,
		Values:  []string{"round-robin", "least-connections"},
		Default: "round-robin",
		Doc:     "How connections are spread over backends.",
		Setting: true,
	})
	interval := set.MustDeclare(annotation.Annotation{
		Name:    "lb.example.com/health-check-interval",
		Kind:    annotation.KindDuration,
		Default: "10s",
		Doc:     "Time between two health probes.",
	})

	v, set1, err := algorithm.Enum(map[string]string{})
	fmt.Printf("absent: %q set=%v err=%v\n", v, set1, err)
	v, set1, err = algorithm.Enum(map[string]string{"lb.example.com/algorithm": "round-robin"})
	fmt.Printf("present: %q set=%v err=%v\n", v, set1, err)
	d, _, err := interval.Duration(map[string]string{"lb.example.com/health-check-interval": "10 seconds"})
	fmt.Println(d, err)

	_ = set.WriteMarkdown(os.Stdout, "Annotations")
	// Output:
	// absent: "round-robin" set=false err=<nil>
	// present: "round-robin" set=true err=<nil>
	// 0s annotation "lb.example.com/health-check-interval": invalid value "10 seconds": expected a non-negative duration such as "30s" or "1m30s"
	// # Annotations
	//
	// | Annotation | Type | Default |
	// |---|---|---|
	// | [`lb.example.com/algorithm`](#lbexamplecomalgorithm) | enum | `round-robin` |
	// | [`lb.example.com/health-check-interval`](#lbexamplecomhealth-check-interval) | duration | `10s` |
	//
	// ## `lb.example.com/algorithm`
	//
	// - Type: enum
	// - Accepted values: one of "round-robin", "least-connections"
	// - Default: `round-robin`
	// - Provider setting: changing it updates the load balancer
	//
	// How connections are spread over backends.
	//
	// ## `lb.example.com/health-check-interval`
	//
	// - Type: duration
	// - Accepted values: a non-negative duration such as "30s" or "1m30s"
	// - Default: `10s`
	//
	// Time between two health probes.
}

// ExampleAnnotation_Ports declares an annotation with a value per Service
// port and reads it: the ports it lists by number or name, and the
// Default for every other port.
func ExampleAnnotation_Ports() {
	var set annotation.Set
	proxy := set.MustDeclare(annotation.Annotation{
		Name:    "lb.example.com/proxy-protocol-ports",
		Kind:    annotation.KindBool,
		PerPort: true,
		Default: "false",
		Doc:     "Send the PROXY protocol header to the backends of these ports.",
	})

	svc := map[string]string{"lb.example.com/proxy-protocol-ports": "https=true, 8443 = true"}
	ports, set1, err := proxy.Ports(svc)
	fmt.Println(ports["https"], ports["8443"], set1, err)
	for _, port := range []string{"https", "http"} {
		v, ok := ports[port]
		if !ok {
			v = proxy.Default // not listed
		}
		fmt.Printf("%s: %s\n", port, v)
	}
	c, _, _ := proxy.Canonical(svc)
	fmt.Println(c)

	_, _, err = proxy.Ports(map[string]string{"lb.example.com/proxy-protocol-ports": "https=true,https=false"})
	fmt.Println(err)
	// Output:
	// true true true <nil>
	// https: true
	// http: false
	// 8443=true,https=true
	// annotation "lb.example.com/proxy-protocol-ports": invalid value "https=true,https=false": expected comma-separated PORT=VALUE entries such as "443=true,https=false", each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE "true" or "false": entries 1 and 2 have PORT "https"
}
