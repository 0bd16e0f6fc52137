package buildcache

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func writeTool(t *testing.T, dir, mainBody string) {
	t.Helper()
	files := map[string]string{
		"go.mod":  "module example.com/tool\n\ngo 1.26\n",
		"go.sum":  "",
		"main.go": "package main\n\nfunc main() {" + mainBody + "}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeToolModule writes a module with one command per entry of Tools,
// the layout of testing/e2e/tools.
func writeToolModule(t *testing.T, dir, mainBody string) {
	t.Helper()
	writeTool(t, dir, "")
	os.Remove(filepath.Join(dir, "main.go"))
	for _, tool := range Tools {
		if err := os.MkdirAll(filepath.Join(dir, tool), 0o755); err != nil {
			t.Fatal(err)
		}
		body := "package main\n\nfunc main() {" + mainBody + "}\n"
		if err := os.WriteFile(filepath.Join(dir, tool, "main.go"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestToolKey(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeToolModule(t, a, "")
	writeToolModule(t, b, "")
	ka, err := ToolKey(a)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := ToolKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if ka != kb {
		t.Errorf("same files, different keys %q and %q: the key must depend on content only", ka, kb)
	}
	writeToolModule(t, b, "println()")
	if kb2, _ := ToolKey(b); kb2 == ka {
		t.Errorf("changing the tools' main.go kept the key %q: a changed tool would never be rebuilt", ka)
	}
	if _, err := ToolKey(t.TempDir()); err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Errorf("ToolKey of an empty dir: err = %v, want one naming go.mod", err)
	}
}

// TestToolModuleLayout checks the real tool module: one go.mod for every
// tool, none of its own, so the shared packages build once.
func TestToolModuleLayout(t *testing.T) {
	mod, err := ModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(mod, "tools")
	if _, err := ToolKey(src); err != nil {
		t.Fatal(err)
	}
	for _, tool := range Tools {
		if _, err := os.Stat(filepath.Join(src, tool, "go.mod")); err == nil {
			t.Errorf("tools/%s has a go.mod of its own: it would resolve and compile the shared packages apart", tool)
		}
	}
}

func TestGoBuildAll(t *testing.T) {
	dir := t.TempDir()
	writeToolModule(t, dir, "")
	bin := t.TempDir()
	var pkgs, outs []string
	for _, tool := range Tools {
		pkgs = append(pkgs, "./"+tool)
		outs = append(outs, filepath.Join(bin, tool+"-key"))
	}
	if err := goBuildAll(t.Context(), dir, nil, pkgs, outs); err != nil {
		t.Fatal(err)
	}
	for _, out := range outs {
		if !isExecutable(out) {
			t.Errorf("goBuildAll did not produce an executable at %s", out)
		}
	}
	if entries, _ := os.ReadDir(bin); len(entries) != len(outs) {
		t.Errorf("bin holds %d entries, want the %d binaries and no temporary directory", len(entries), len(outs))
	}
	if _, err := Tool(t.Context(), "kubelet", nil); err == nil || !strings.Contains(err.Error(), `"kubelet"`) {
		t.Errorf("Tool(kubelet): err = %v, want one naming the unknown tool", err)
	}
}

func TestGoBuild(t *testing.T) {
	dir := t.TempDir()
	writeTool(t, dir, "")
	out := filepath.Join(t.TempDir(), "tool")
	if err := GoBuild(t.Context(), dir, ".", out); err != nil {
		t.Fatal(err)
	}
	if !isExecutable(out) {
		t.Errorf("GoBuild did not produce an executable at %s", out)
	}
	writeTool(t, dir, "undefinedFunction()")
	err := GoBuild(t.Context(), dir, ".", out+"2")
	if err == nil || !strings.Contains(err.Error(), "undefinedFunction") {
		t.Errorf("GoBuild of a broken package: err = %v, want the compiler output", err)
	}
	if matches, _ := filepath.Glob(out + "2*"); len(matches) != 0 {
		t.Errorf("failed build left files behind: %v", matches)
	}
}

func TestDirHonoursEnv(t *testing.T) {
	want := filepath.Join(t.TempDir(), "cache")
	t.Setenv(EnvCacheDir, want)
	got, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Dir() = %q, want %q from $%s", got, want, EnvCacheDir)
	}
	if !isDir(filepath.Join(want, "bin")) {
		t.Errorf("Dir() did not create %s/bin", want)
	}
}

func TestModuleDir(t *testing.T) {
	dir, err := ModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !strings.Contains(string(b), "module github.com/ccmkit/ccmkit/testing/e2e\n") {
		t.Errorf("ModuleDir() = %q, whose go.mod is not the e2e module's (err %v)", dir, err)
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// TestToolFlags: the real tool module stamps kube-apiserver with the
// version of k8s.io/kubernetes it requires; a malformed one is an error
// naming it; a module without it gets no flags.
func TestToolFlags(t *testing.T) {
	mod, err := ModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	flags, err := ToolFlags(filepath.Join(mod, "tools"))
	if err != nil {
		t.Fatal(err)
	}
	if len(flags) != 1 || !strings.Contains(flags[0], "-X k8s.io/component-base/version.gitVersion=v1.") || !strings.Contains(flags[0], "k8s.io/client-go/pkg/version.gitMinor=") {
		t.Errorf("ToolFlags(tools) = %q: want -ldflags stamping component-base's and client-go's version", flags)
	}
	dir := t.TempDir()
	writeToolModule(t, dir, "")
	if flags, err := ToolFlags(dir); err != nil || flags != nil {
		t.Errorf("ToolFlags of a module without k8s.io/kubernetes = %q, %v: want none", flags, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n\nrequire k8s.io/kubernetes master\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ToolFlags(dir); err == nil || !strings.Contains(err.Error(), `"master": expected a version vMAJOR.MINOR.PATCH`) {
		t.Errorf("ToolFlags with k8s.io/kubernetes at master: error %v, want one naming the version", err)
	}
}

// moduleVersions returns the module path → version (after replace
// directives) of every package pkgs depend on, as the go command resolves
// them in the module in dir.
func moduleVersions(t *testing.T, dir string, pkgs ...string) map[string]string {
	t.Helper()
	args := append([]string{"-C", dir, "list", "-deps", "-f",
		"{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}"}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	versions := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok && version != "" {
			versions[path] = version
		}
	}
	return versions
}

// TestSharedVersions checks that every module both the demo (and the
// example CCM, built in this module by package ccm) and the servers of the
// tool module depend on has one version in both build lists. The go
// command's build cache keys a compiled package by its dependencies'
// versions too, so one differing version low in the graph (golang.org/x/sys,
// go-logr) makes a cold first demo compile client-go, the API types and the
// rest twice: the demo took 3m22s to compile before the servers'
// 7m16s, sharing almost nothing with them. Raise tools/go.mod to the
// version this module resolves (go get MODULE@VERSION in testing/e2e/tools)
// when this fails.
func TestSharedVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("loads every package of kube-apiserver")
	}
	mod, err := ModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	ours := moduleVersions(t, mod, "./cmd/demo", "github.com/ccmkit/ccmkit/example")
	servers := moduleVersions(t, filepath.Join(mod, "tools"), toolPackages()...)
	shared := 0
	for path, v := range ours {
		if sv, ok := servers[path]; ok {
			shared++
			if sv != v {
				t.Errorf("module %s: testing/e2e resolves %s, testing/e2e/tools %s: expected one version", path, v, sv)
			}
		}
	}
	for _, want := range []string{"k8s.io/client-go", "k8s.io/api", "golang.org/x/sys"} {
		if _, ok := servers[want]; !ok || ours[want] == "" {
			t.Errorf("module %s: expected both build lists to have it (ours %q)", want, ours[want])
		}
	}
	t.Logf("%d modules shared, %d ours, %d the servers'", shared, len(ours), len(servers))
}
