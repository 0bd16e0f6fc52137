package ccmkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// libraryDirs are the packages CONTRIBUTING.md's checked rules apply to:
// every non-test package of the root module but the example main.
func libraryDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		switch {
		case path == ".":
			return nil
		case path == "testing/e2e", path == "example", strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", d.Name() == "hack":
			return filepath.SkipDir
		}
		if m, _ := filepath.Glob(filepath.Join(path, "*.go")); len(m) > 0 && path != "." {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// parseLibrary parses the non-test files of dir, with comments.
func parseLibrary(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// typeName is the name of a parameter's type without package or pointer.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return typeName(e.X)
	}
	return ""
}

// receiverName is the type name of a method's receiver, "" for a function.
func receiverName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return ""
	}
	return typeName(fn.Recv.List[0].Type)
}

// TestConventions checks the rules CONTRIBUTING.md marks "(checked)" on every
// library package; each failure names the rule, the place and the name.
func TestConventions(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range libraryDirs(t) {
		files := parseLibrary(t, fset, dir)
		validates := map[string]bool{} // types with a Validate method
		for _, f := range files {
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "Validate" {
					validates[receiverName(fn)] = true
				}
			}
		}
		for _, f := range files {
			checkFile(t, fset, f, validates)
		}
	}
}

func checkFile(t *testing.T, fset *token.FileSet, f *ast.File, validates map[string]bool) {
	t.Helper()
	at := func(n ast.Node) string { return fset.Position(n.Pos()).String() }
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			checkFunc(t, at(d), d)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if d.Doc == nil && s.Doc == nil {
						t.Errorf("A8 %s: exported type %s has no doc comment", at(s), s.Name.Name)
					}
					if s.Name.Name == "Option" {
						t.Errorf("A1 %s: type Option: functional options are not used; expected an Options struct", at(s))
					}
					if strings.HasSuffix(s.Name.Name, "Config") && !validates[s.Name.Name] {
						t.Errorf("A2 %s: type %s has no Validate method: expected a Config to be a file's or a run's typed form, with Validate", at(s), s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if !n.IsExported() {
							continue
						}
						if d.Doc == nil && s.Doc == nil && s.Comment == nil {
							t.Errorf("A8 %s: exported %s has no doc comment", at(n), n.Name)
						}
						if strings.HasPrefix(n.Name, "Default") {
							t.Errorf("A5 %s: exported default %s: expected an unexported constant, its value stated in the field's doc", at(n), n.Name)
						}
					}
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		for _, bad := range []string{"; expected", ", want ", ": want "} {
			if strings.Contains(s, bad) {
				t.Errorf("E1 %s: message %q says %q: expected \": expected\"", at(lit), cutMessage(s), bad)
			}
		}
		return true
	})
}

func checkFunc(t *testing.T, at string, fn *ast.FuncDecl) {
	t.Helper()
	recv := receiverName(fn)
	if !fn.Name.IsExported() || (recv != "" && !ast.IsExported(recv)) {
		return
	}
	name := fn.Name.Name
	if recv != "" {
		name = recv + "." + name
	}
	if fn.Doc == nil {
		t.Errorf("A8 %s: exported %s has no doc comment", at, name)
	}
	if recv == "" && strings.HasPrefix(fn.Name.Name, "With") {
		t.Errorf("A1 %s: %s is a functional option: expected a field of an Options struct", at, name)
	}
	params := fn.Type.Params.List
	var types []string
	for _, p := range params {
		n := max(len(p.Names), 1)
		for range n {
			types = append(types, typeName(p.Type))
		}
	}
	isNew := recv == "" && strings.HasPrefix(fn.Name.Name, "New")
	for i, ty := range types {
		if !strings.HasSuffix(ty, "Options") {
			continue
		}
		if !isNew {
			t.Errorf("A2 %s: %s takes %s: expected Options only as a constructor's input (a pure function takes <Func>Input)", at, name, ty)
		} else if i != len(types)-1 {
			t.Errorf("A1 %s: %s takes %s before other parameters: expected the options struct last", at, name, ty)
		}
	}
	if isNew && len(types) > 0 && !strings.HasSuffix(types[len(types)-1], "Options") && !slices.Contains(constructorExceptions, name) {
		t.Errorf("A1 %s: constructor %s(%s): expected its last parameter to be an Options struct", at, name, strings.Join(types, ", "))
	}
}

// constructorExceptions are the New functions that are not constructors of
// a configurable type, each with the reason.
var constructorExceptions = []string{
	"NewBudget", // internal/throttle: a value (a time budget), not a configurable type
}

func cutMessage(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
