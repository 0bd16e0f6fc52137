package buildcache

import (
	"os"
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

func TestToolKey(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeTool(t, a, "")
	writeTool(t, b, "")
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
	writeTool(t, b, "println()")
	if kb2, _ := ToolKey(b); kb2 == ka {
		t.Errorf("changing main.go kept the key %q: a changed tool would never be rebuilt", ka)
	}
	if _, err := ToolKey(t.TempDir()); err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Errorf("ToolKey of an empty dir: err = %v, want one naming go.mod", err)
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
