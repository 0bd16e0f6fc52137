// Command admission-policy writes the ValidatingAdmissionPolicy and binding
// (package admission) that make the apiserver refuse a LoadBalancer Service
// the provider's load-balancer Reconciler would refuse: a malformed declared
// annotation, a feature the provider does not support. `kubectl apply` of
// such a Service then fails at once with the message the CCM would only
// have given later, as a Warning event. No webhook server is involved.
//
// It builds the provider named by --cloud-provider from --cloud-config, as
// the example CCM does (example/main.go), and reads the declarations from
// its LoadBalancer, a loadbalancer.Reconciler:
//
//	go run ./example/cmd/admission-policy --cloud-provider=fake \
//	    --cloud-config=example/cloud-config.yaml --out example/deploy/admission-policy.yaml
//
// The output for the fake is example/deploy/admission-policy.yaml, checked
// by this command's test (go test ./example/cmd/admission-policy -update
// rewrites it). To make it yours: replace the fake import with your
// provider package, as in example/main.go, and deploy the manifest with
// your CCM; regenerate it when your annotations or capabilities change.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ccmkit/ccmkit/admission"
	"github.com/ccmkit/ccmkit/annotation"
	_ "github.com/ccmkit/ccmkit/fake/register" // registers provider "fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp): // -h: the usage is printed
	case err != nil:
		fmt.Fprintln(os.Stderr, "admission-policy:", err)
		os.Exit(2)
	}
}

// options are the command's flags.
type options struct {
	cloudProvider, cloudConfig, name, out string
}

// parse reads the flags of args; usage and flag errors go to stderr.
func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("admission-policy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.cloudProvider, "cloud-provider", "", "The provider whose declarations to read: the name of a provider registered in this binary (required).")
	fs.StringVar(&o.cloudConfig, "cloud-config", "", "The provider's cloud-config file, as the CCM's --cloud-config; empty: none.")
	fs.StringVar(&o.name, "name", "", `The name of the policy and of its binding. Empty: "ccmkit-<cloud-provider>-service-load-balancer".`)
	fs.StringVar(&o.out, "out", "", "The file to write; empty or -: standard output.")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("arguments %q: expected flags only", fs.Args())
	}
	if o.name == "" {
		o.name = defaultName(o.cloudProvider)
	}
	return o, nil
}

// defaultName is the name of the policy of provider when --name is empty.
func defaultName(provider string) string { return "ccmkit-" + provider + "-service-load-balancer" }

// toStdout reports whether --out asks for standard output.
func (o options) toStdout() bool { return o.out == "" || o.out == "-" }

// run parses args and writes the manifest to --out or stdout.
func run(args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	b, err := generate(o)
	if err != nil {
		return err
	}
	if o.toStdout() {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(o.out, b, 0o644); err != nil { //nolint:gosec // G306: a manifest to review and apply, readable like any generated file; it holds no secret
		return fmt.Errorf("--out=%q: expected a writable file: %w", o.out, err)
	}
	return nil
}

// declarations is what the Reconciler of a ccmkit provider reports of
// itself (loadbalancer.Reconciler's Annotations and Capabilities).
type declarations interface {
	Annotations() *annotation.Set
	Capabilities() loadbalancer.Capabilities
}

// generate builds the provider of o and returns the manifest of its
// declarations. Errors name the flag, the value and what was expected.
func generate(o options) ([]byte, error) {
	if errs := validation.IsDNS1123Subdomain(o.name); len(errs) > 0 {
		return nil, fmt.Errorf("--name=%q: expected a DNS subdomain (lower-case letters, digits, '-' and '.'): %s", o.name, strings.Join(errs, "; "))
	}
	d, err := declarationsOf(o.cloudProvider, o.cloudConfig)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = admission.WriteYAML(&b, admission.PolicyInput{
		Name:         o.name,
		Annotations:  d.Annotations(),
		Capabilities: d.Capabilities(),
		Regenerate:   regenerate(o),
	})
	if err != nil {
		return nil, fmt.Errorf("cloud provider %q: %w", o.cloudProvider, err)
	}
	return b.Bytes(), nil
}

// declarationsOf builds the provider name from the cloud-config at path,
// as the example CCM's initCloud does, and returns its load balancers'
// declarations.
func declarationsOf(name, path string) (declarations, error) {
	cloud, err := provider.InitCloud(name, path)
	if err != nil {
		return nil, err
	}
	lb, ok := cloud.LoadBalancer()
	if !ok || lb == nil {
		return nil, fmt.Errorf("--cloud-provider=%q has no load balancers (LoadBalancer reports none): expected a provider whose LoadBalancer is a ccmkit loadbalancer.Reconciler", name)
	}
	d, ok := lb.(declarations)
	if !ok {
		return nil, fmt.Errorf("--cloud-provider=%q: its LoadBalancer (%T) does not report its declarations: expected a ccmkit loadbalancer.Reconciler, or a type with Annotations() *annotation.Set and Capabilities() loadbalancer.Capabilities", name, lb)
	}
	return d, nil
}

// regenerate is the command line that writes the same file again.
func regenerate(o options) string {
	cmd := "go run ./example/cmd/admission-policy --cloud-provider=" + shellWord(o.cloudProvider)
	if o.cloudConfig != "" {
		cmd += " --cloud-config=" + shellWord(o.cloudConfig)
	}
	if o.name != defaultName(o.cloudProvider) {
		cmd += " --name=" + shellWord(o.name)
	}
	if !o.toStdout() {
		cmd += " --out " + shellWord(o.out)
	}
	return cmd
}

// shellWord quotes s for a POSIX shell when it needs it: in single
// quotes, or, when s holds a character that is not printable (a newline
// in a file name, an escape), in dollar-single quotes ($'…', POSIX.1-2024
// and every common shell) with each byte of such a character written
// \NNN (octal), so that the command stays one printable line, which
// admission.WriteYAML requires of it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@+,") == "" {
		return s
	}
	if printable(s) {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteByte(s[0])
		case r != utf8.RuneError && strconv.IsPrint(r):
			b.WriteString(s[:n])
		default: // not printable, or not UTF-8: its bytes
			for i := range n {
				fmt.Fprintf(&b, "\\%03o", s[i])
			}
		}
		s = s[n:]
	}
	b.WriteString("'")
	return b.String()
}

// printable reports whether s is valid UTF-8 of printable runes only
// (strconv.IsPrint).
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}
