package image

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ccmkit/ccmkit/testing/e2e/chart"
)

// recipe is example/Dockerfile resolved for linux/amd64 and its default
// VERSION.
func recipe(t *testing.T, version string) *Recipe {
	t.Helper()
	d, _, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.Recipe(BuildArgs(Platform{OS: "linux", Arch: "amd64"}, version))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRecipe(t *testing.T) {
	r := recipe(t, "")
	if r.Base != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("Base = %q: want distroless/static's nonroot variant", r.Base)
	}
	if r.Binary != "/cloud-controller-manager" || !slices.Equal(r.Entrypoint, []string{"/cloud-controller-manager"}) {
		t.Errorf("Binary = %q, Entrypoint = %q: want /cloud-controller-manager for both", r.Binary, r.Entrypoint)
	}
	if r.User != "65532:65532" {
		t.Errorf("User = %q: want 65532:65532", r.User)
	}
	b := r.Build
	for _, want := range []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"} {
		if !slices.Contains(b.Env, want) {
			t.Errorf("go build env %q: want %s (a static binary for the target platform)", b.Env, want)
		}
	}
	wantFlags := []string{"-trimpath", "-ldflags=-s -w -X k8s.io/component-base/version.gitVersion=v0.1.0"}
	if !slices.Equal(b.Flags, wantFlags) || b.Package != "./example" || b.Output != "/out/cloud-controller-manager" {
		t.Errorf("go build = %q -o %s %s: want %q -o /out/cloud-controller-manager ./example", b.Flags, b.Output, b.Package, wantFlags)
	}
	if got := r.Labels["org.opencontainers.image.version"]; got != "v0.1.0" {
		t.Errorf("version label = %q: want v0.1.0", got)
	}
	if got := r.Labels["org.opencontainers.image.source"]; got != "https://github.com/ccmkit/ccmkit" {
		t.Errorf("source label = %q", got)
	}
	if got := recipe(t, "v9.8.7"); !strings.HasSuffix(got.Build.Flags[1], "gitVersion=v9.8.7") || got.Labels["org.opencontainers.image.version"] != "v9.8.7" {
		t.Errorf("VERSION=v9.8.7 gives flags %q, labels %v: want it in both", got.Build.Flags, got.Labels)
	}
}

// TestRecipeAgreesWithChart: the chart runs what the image holds, as the
// user the image declares, and its default tag is the image's version.
func TestRecipeAgreesWithChart(t *testing.T) {
	r := recipe(t, "")
	c, err := chart.Load()
	if err != nil {
		t.Fatal(err)
	}
	files, err := chart.Render(c, "ccm", chart.DeployNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(files)
	if err != nil {
		t.Fatal(err)
	}
	var dep *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			dep = o
		}
	}
	if dep == nil {
		t.Fatal("the chart renders no Deployment")
	}
	pod, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "spec")
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	if len(containers) != 1 {
		t.Fatalf("the Deployment has %d containers: want 1", len(containers))
	}
	ctr := containers[0].(map[string]any)
	command, _, _ := unstructured.NestedStringSlice(ctr, "command")
	if !slices.Equal(command, r.Entrypoint) {
		t.Errorf("chart command %q != Dockerfile ENTRYPOINT %q", command, r.Entrypoint)
	}
	uid, _, _ := unstructured.NestedFieldNoCopy(pod, "securityContext", "runAsUser")
	gid, _, _ := unstructured.NestedFieldNoCopy(pod, "securityContext", "runAsGroup")
	if got := fmt.Sprint(uid, ":", gid); got != r.User {
		t.Errorf("chart runAsUser:runAsGroup %s != Dockerfile USER %s", got, r.User)
	}
	version := r.Labels["org.opencontainers.image.version"]
	image, _, _ := unstructured.NestedString(ctr, "image")
	if !strings.HasSuffix(image, ":"+version) || c.Metadata.AppVersion != version {
		t.Errorf("chart image %q, appVersion %q: want both at the Dockerfile's VERSION %s", image, c.Metadata.AppVersion, version)
	}
}

func TestParseErrors(t *testing.T) {
	const good = "FROM golang AS build\nRUN CGO_ENABLED=0 go build -o /out/ccm ./example\n" +
		"FROM scratch\nCOPY --from=build /out/ccm /ccm\nUSER 65532:65532\nENTRYPOINT [\"/ccm\"]\n"
	if _, err := mustRecipe(good); err != nil {
		t.Fatalf("the minimal Dockerfile: %v", err)
	}
	for _, tc := range []struct {
		name, text string
		want       []string // substrings of the error
	}{
		{"unsupported instruction", "FROM scratch\nADD x /x\n", []string{"Dockerfile:2", `"ADD"`, "expected one of"}},
		{"no FROM", "# nothing\n", []string{"no FROM", "expected at least one"}},
		{"instruction before FROM", "RUN true\nFROM scratch\n", []string{"Dockerfile:1", "before the first FROM"}},
		{"dangling continuation", "FROM scratch \\\n", []string{"Dockerfile:1", "line continuation"}},
		{"bad FROM", "FROM a b\n", []string{`FROM "a b"`, "AS and a stage name"}},
		{"bad ARG", "ARG 1X=2\nFROM scratch\n", []string{`ARG name "1X"`}},
		{"empty instruction", "FROM scratch\nUSER\n", []string{"Dockerfile:2", "USER has no arguments"}},
		{"shell operator", strings.Replace(good, "./example", "./example && rm -rf /", 1), []string{"Dockerfile:2", "shell operator", "single command"}},
		{"unknown variable", strings.Replace(good, "CGO_ENABLED=0", "GOOS=$TARGETOS", 1), []string{"Dockerfile:2", `"TARGETOS"`, "ARGs in scope"}},
		{"stage ARG in FROM", strings.Replace(strings.Replace(good, "FROM scratch", "FROM $BASE", 1), "FROM golang AS build", "FROM golang AS build\nARG BASE=scratch", 1), []string{"Dockerfile:4: FROM", `"BASE"`, "before the first FROM"}},
		{"no go build", strings.Replace(good, "go build", "make", 1), []string{`stage "build" has 0 RUN`, "expected one"}},
		{"two packages", strings.Replace(good, "./example", "./a ./b", 1), []string{"expected one package"}},
		{"relative output", strings.Replace(good, "-o /out/ccm", "-o ccm", 1), []string{`-o "ccm"`, "absolute output path"}},
		{"copies something else", strings.Replace(good, "COPY --from=build /out/ccm", "COPY --from=build /out/other", 1), []string{"Dockerfile:4", `copies "/out/other"`, `"/out/ccm"`}},
		{"unknown stage", strings.Replace(good, "--from=build", "--from=bild", 1), []string{`no stage named "bild"`, `["build"]`}},
		{"two copies", strings.Replace(good, "USER", "COPY --from=build /out/ccm /x\nUSER", 1), []string{"2 COPY instructions", "expected one"}},
		{"shell-form entrypoint", strings.Replace(good, `["/ccm"]`, "/ccm --v=2", 1), []string{"Dockerfile:6", "exec form"}},
		{"entrypoint runs another file", strings.Replace(good, `["/ccm"]`, `["/bin/sh"]`, 1), []string{`runs "/bin/sh"`, `copied binary "/ccm"`}},
		{"no USER", strings.Replace(good, "USER 65532:65532\n", "", 1), []string{"no USER", "non-root"}},
		{"RUN in the final stage", good + "RUN true\n", []string{"Dockerfile:7", "expected only ARG"}},
		{"bad label", strings.Replace(good, "USER", "LABEL novalue\nUSER", 1), []string{`"novalue"`, "NAME=value"}},
		{"unterminated quote", strings.Replace(good, "./example", `"./example`, 1), []string{"unterminated double quote"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mustRecipe(tc.text)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q: want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestRecipeBase checks that the final FROM sees the global ARGs, as
// docker build's does: their defaults, the build's values, and the
// platform arguments BuildKit predefines.
func TestRecipeBase(t *testing.T) {
	const text = "ARG BASE=gcr.io/distroless/static-debian12\nARG FLAVOUR=nonroot\n" +
		"FROM golang AS build\nRUN go build -o /out/ccm ./example\n" +
		"FROM ${BASE}:${FLAVOUR}-$TARGETARCH\nCOPY --from=build /out/ccm /ccm\nUSER 65532:65532\nENTRYPOINT [\"/ccm\"]\n"
	d, err := Parse("Dockerfile", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args map[string]string
		want string
	}{
		{map[string]string{"TARGETARCH": "arm64"}, "gcr.io/distroless/static-debian12:nonroot-arm64"},
		{map[string]string{"TARGETARCH": "amd64", "BASE": "registry.example.com/base"}, "registry.example.com/base:nonroot-amd64"},
	} {
		r, err := d.Recipe(tc.args)
		if err != nil {
			t.Fatalf("Recipe(%v): %v", tc.args, err)
		}
		if r.Base != tc.want {
			t.Errorf("Recipe(%v).Base = %q: want %q", tc.args, r.Base, tc.want)
		}
	}
	if _, err := d.Recipe(nil); err == nil || !strings.Contains(err.Error(), `"TARGETARCH"`) {
		t.Errorf("Recipe without TARGETARCH: error %v, want one naming it", err)
	}
}

func mustRecipe(text string) (*Recipe, error) {
	d, err := Parse("Dockerfile", []byte(text))
	if err != nil {
		return nil, err
	}
	return d.Recipe(nil)
}

func TestWords(t *testing.T) {
	vars := map[string]string{"V": "v1", "OS": "linux"}
	got, err := words(`A=1 GOOS=$OS go build -ldflags="-X a.b=${V}" 'lit $V' x\ y -o=/o ./p`, vars)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=1", "GOOS=linux", "go", "build", "-ldflags=-X a.b=v1", "lit $V", "x y", "-o=/o", "./p"}
	if !slices.Equal(got, want) {
		t.Errorf("words = %q\nwant %q", got, want)
	}
}
