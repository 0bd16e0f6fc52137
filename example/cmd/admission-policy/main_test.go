package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	cloudprovider "k8s.io/cloud-provider"
	fakecloud "k8s.io/cloud-provider/fake"
)

var update = flag.Bool("update", false, "rewrite example/deploy/admission-policy.yaml")

// manifest is the fake's manifest, from the repository root, and the
// arguments that write it (its header says so).
const manifest = "example/deploy/admission-policy.yaml"

var manifestArgs = []string{"--cloud-provider=fake", "--cloud-config=example/cloud-config.yaml", "--out", manifest}

// TestManifest: example/deploy/admission-policy.yaml is what the command
// writes for the fake; -update rewrites it.
func TestManifest(t *testing.T) {
	t.Chdir("../../..") // the repository root, where the command is documented to run
	if *update {
		if err := run(manifestArgs, io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	o, err := parse(manifestArgs, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatalf("%v (run go test ./example/cmd/admission-policy -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is out of date with the fake's declarations; run go test ./example/cmd/admission-policy -update (-want +got):\n%s", manifest, diff)
	}
	for _, s := range []string{"# Regenerate with: go run ./example/cmd/admission-policy " + strings.Join(manifestArgs, " ") + "\n", "name: ccmkit-fake-service-load-balancer\n",
		`"fake.ccmkit.io/idle-timeout" in variables.annotations`} {
		if !strings.Contains(string(want), s) {
			t.Errorf("the manifest does not contain %q", s)
		}
	}
}

// TestStdout: without --out the manifest goes to standard output, under
// the name given.
func TestStdout(t *testing.T) {
	t.Chdir("../../..")
	var out bytes.Buffer
	if err := run([]string{"--cloud-provider=fake", "--cloud-config=example/cloud-config.yaml", "--name=lb-checks"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"\n  name: lb-checks\n", "\n  policyName: lb-checks\n", "--name=lb-checks\n"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the output does not contain %q", s)
		}
	}
}

func init() {
	// A provider registered in this binary whose LoadBalancer is not a
	// ccmkit Reconciler: upstream's call-recording fake.
	cloudprovider.RegisterCloudProvider("upstream-fake", func(io.Reader) (cloudprovider.Interface, error) { return &fakecloud.Cloud{}, nil })
}

// TestErrors: each mistake names the flag, the value and what was
// expected.
func TestErrors(t *testing.T) {
	t.Chdir("../../..")
	for _, tc := range []struct {
		name, reason string
		args         []string
		want         string
	}{
		{name: "no provider", reason: "--cloud-provider is required", args: nil,
			want: `--cloud-provider="": expected the name of a provider registered in this binary, one of ["fake"]`},
		{name: "unknown provider", reason: "registered ones only", args: []string{"--cloud-provider=aws"},
			want: `--cloud-provider="aws": expected the name of a provider registered in this binary, one of ["fake"]`},
		{name: "no cloud-config", reason: "a file that is not there", args: []string{"--cloud-provider=fake", "--cloud-config=nowhere.yaml"},
			want: `--cloud-config="nowhere.yaml": expected a readable cloud-config file: stat nowhere.yaml: no such file or directory`},
		{name: "bad cloud-config", reason: "the provider's own error", args: []string{"--cloud-provider=fake", "--cloud-config=go.mod"},
			want: `cloud provider "fake" could not be initialized from --cloud-config="go.mod": `},
		{name: "bad name", reason: "a DNS subdomain", args: []string{"--cloud-provider=fake", "--name=LB"},
			want: `--name="LB": expected a DNS subdomain (lower-case letters, digits, '-' and '.'): `},
		{name: "not a Reconciler", reason: "the provider must report its declarations", args: []string{"--cloud-provider=upstream-fake"},
			want: `--cloud-provider="upstream-fake": its LoadBalancer (*fake.Cloud) does not report its declarations: expected a ccmkit loadbalancer.Reconciler, or a type with Annotations() *annotation.Set and Capabilities() loadbalancer.Capabilities`},
		{name: "argument", reason: "flags only", args: []string{"--cloud-provider=fake", "extra"},
			want: `arguments ["extra"]: expected flags only`},
		{name: "unwritable out", reason: "--out's directory must exist", args: []string{"--cloud-provider=fake", "--out", "no/such/dir/p.yaml"},
			want: `--out="no/such/dir/p.yaml": expected a writable file: open no/such/dir/p.yaml: no such file or directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout bytes.Buffer
			err := run(tc.args, &stdout, io.Discard)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("%s: error %v; want one starting %q", tc.reason, err, tc.want)
			}
			if stdout.Len() > 0 {
				t.Errorf("%s: %d bytes written to stdout on error", tc.reason, stdout.Len())
			}
		})
	}
}

// TestShellWord: a word the command line quotes reads back as itself in
// a POSIX shell, on one printable line, whatever it holds.
func TestShellWord(t *testing.T) {
	sh, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to read the words back:", err)
	}
	for _, s := range []string{"plain.yaml", "a b.yaml", "it's", `back\slash`, "a\nkind: Secret", "\x1b[2J", "tab\there", "bidi\u202e.yaml",
		"é.yaml", "\u2028", "\xff", "$'x'", "\\'", "\ufffd", "\x7f"} {
		w := shellWord(s)
		for _, r := range w {
			if !strconv.IsPrint(r) {
				t.Errorf("shellWord(%q) = %q: not one printable line", s, w)
				break
			}
		}
		out, err := exec.Command(sh, "-c", "printf %s "+w).Output() //nolint:gosec // G204: runs the shell on the word under test: that is the test
		if err != nil {
			t.Errorf("shellWord(%q) = %q: bash: %v", s, w, err)
			continue
		}
		if string(out) != s {
			t.Errorf("shellWord(%q) = %q, which bash reads as %q", s, w, out)
		}
	}
}

// TestHostileOut: an --out file name that could break the header comment
// (a newline, then YAML) is written quoted on the comment's one line, and
// the manifest still holds the two objects alone.
func TestHostileOut(t *testing.T) {
	t.Chdir("../../..")
	out := filepath.Join(t.TempDir(), "a\n---\nkind: Secret\n.yaml")
	if err := run([]string{"--cloud-provider=fake", "--cloud-config=example/cloud-config.yaml", "--out", out}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(string(b), "\napiVersion: ")
	if want := "\n# Regenerate with: go run ./example/cmd/admission-policy --cloud-provider=fake --cloud-config=example/cloud-config.yaml --out " + shellWord(out) + "\n"; !strings.Contains(header, want) {
		t.Errorf("the header does not hold %q:\n%s", want, header)
	}
	if n := strings.Count(string(b), "\n---\n"); n != 1 || strings.Count(string(b), "\nkind: ") != 2 {
		t.Errorf("%d document separators, %d kinds; want 1 and 2:\n%s", n, strings.Count(string(b), "\nkind: "), header)
	}
}
