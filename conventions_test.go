package ccmkit_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConventions checks the rules CONTRIBUTING.md marks "(checked)" on every
// library package; each failure names the rule, the place and the name.
// TestConventionsFixture proves that each check can fail.
func TestConventions(t *testing.T) {
	lists := allowLists{params: constructorExceptions, results: valueConstructors}
	found, used, err := checkConventions(".", lists)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range found {
		t.Error(v)
	}
	checkAllowLists(t, lists, used)
}

// TestConventionsFixture runs the checks over testdata/conventions, a tree
// that breaks every check at least once (and keeps each rule once where an
// exemption, an allow-list or a compliant form must keep it quiet), and
// compares what they report with what the fixture was written to break, the
// way testing/fstest checks its checker: a check that cannot fail shows
// here as a missing row, one that fires too widely as an extra one.
func TestConventionsFixture(t *testing.T) {
	const root = "testdata/conventions"
	lists := allowLists{
		params:  map[string]string{"broken.NewExempt": "fixture: an allow-listed constructor without an options struct"},
		results: map[string]string{"broken.NewValue": "fixture: an allow-listed value constructor"},
	}
	found, used, err := checkConventions(root, lists)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Check, File, Name string }
	want := []row{
		{"A1/option-type", "broken/broken.go", "Option"},
		{"A1/functional-option", "broken/broken.go", "WithSize"},
		{"A1/options-last", "broken/broken.go", "NewOptionsFirst"},
		{"A1/last-param-options", "broken/broken.go", "NewOptionsFirst"},
		{"A1/last-param-options", "broken/broken.go", "NewPositional"},
		{"A1/result-shape", "broken/broken.go", "NewNoError"},
		{"A1/result-shape", "broken/broken.go", "NewValueFirst"},
		{"A1/result-shape", "broken/broken.go", "NewNotError"},
		{"A1/result-shape", "broken/broken.go", "NewThree"},
		{"A1/result-shape", "broken/broken.go", "NewForeign"},
		{"A2/options-input", "broken/broken.go", "Resize"},
		{"A2/config-validate", "broken/broken.go", "BrokenConfig"},
		{"A5/exported-default", "broken/broken.go", "DefaultSize"},
		{"A8/type-doc", "broken/broken.go", "Bare"},
		{"A8/value-doc", "broken/broken.go", "Loose"},
		{"A8/func-doc", "broken/broken.go", "Undocumented"},
		{"A8/func-doc", "broken/broken.go", "Widget.Undocumented"},
		{"E1/message", "broken/broken.go", "; expected"},
		{"E1/message", "broken/broken.go", ", want "},
		{"E1/message", "broken/broken.go", ": want "},
	}
	var got []row
	for _, v := range found {
		file, err := filepath.Rel(root, v.pos.Filename)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, row{v.check, filepath.ToSlash(file), v.name})
	}
	less := func(a, b row) int { return strings.Compare(a.Check+a.File+a.Name, b.Check+b.File+b.Name) }
	slices.SortFunc(want, less)
	slices.SortFunc(got, less)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checks over %s (-want +got):\n%s\nall reported:\n%s", root, diff, joinViolations(found))
	}
	// Each check is proven able to fail: the fixture must break every one.
	for _, c := range checks {
		if !slices.ContainsFunc(want, func(r row) bool { return r.Check == c }) {
			t.Errorf("check %s: not broken by %s: expected a fixture case that proves it can fail", c, root)
		}
	}
	checkAllowLists(t, lists, used)
}

// checkAllowLists reports an allow-list entry without a reason, and one
// that exempted nothing (a stale entry would hide the next violation of
// that name).
func checkAllowLists(t *testing.T, lists allowLists, used map[string]bool) {
	t.Helper()
	for list, m := range map[string]map[string]string{"constructorExceptions": lists.params, "valueConstructors": lists.results} {
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if strings.TrimSpace(m[name]) == "" {
				t.Errorf("%s[%q]: no reason: expected why the name is exempt", list, name)
			}
			if !used[list+" "+name] {
				t.Errorf("%s[%q]: exempts nothing: expected the entry removed", list, name)
			}
		}
	}
}

// constructorExceptions are the New functions that are not constructors of
// a configurable type, so take no options struct last (rule A1), keyed by
// "<dir>.<Name>", each with the reason.
var constructorExceptions = map[string]string{
	"internal/throttle.NewBudget": "a value (a time budget), not a configurable type",
	"provider.NewSecret":          "a value (a credential), not a configurable type",
}

// valueConstructors are the exported New functions of library packages that
// do not return (*X, error) (rule A1), keyed by "<dir>.<Name>", each with
// the reason: value constructors that cannot fail, and the known
// violations, marked TODO with their issue. (None is left: a TODO entry
// names the issue that fixes it.)
var valueConstructors = map[string]string{
	"provider.NewSecret":                         "a value that cannot fail: it seals the text it is given, as a conversion would",
	"housekeeping.NewDriftRepairController":      "the value of a CCM's controller map (app.ControllerInitFuncConstructor), built before the flags bound to opts are parsed, so it cannot check them; NewDriftRepair, which it calls at start, returns (*DriftRepair, error) and its error stops the CCM",
	"housekeeping.NewOrphanCollectionController": "the value of a CCM's controller map (app.ControllerInitFuncConstructor), built before the flags bound to opts are parsed, so it cannot check them; NewOrphanCollector, which it calls at start, returns (*OrphanCollector, error) and its error stops the CCM",
}

// checks are the keys of the checks checkConventions runs, "<rule>/<what>";
// report refuses any other, so a new check must be listed here, and
// TestConventionsFixture then requires a fixture case that breaks it.
var checks = []string{
	"A1/option-type",        // a type named Option
	"A1/functional-option",  // a function named With…
	"A1/options-last",       // a constructor's options struct is not its last parameter
	"A1/last-param-options", // a constructor's last parameter is not an options struct
	"A1/result-shape",       // an exported New… of a non-internal package does not return (*X, error)
	"A2/options-input",      // a function other than a constructor takes …Options
	"A2/config-validate",    // a …Config type without Validate
	"A5/exported-default",   // an exported Default… value
	"A8/type-doc",           // an exported type without a doc comment
	"A8/value-doc",          // an exported const or var without a doc comment
	"A8/func-doc",           // an exported function or method without a doc comment
	"E1/message",            // a string literal with "; expected", ", want " or ": want "
}

// allowLists are the exemptions checkConventions honours, keyed by
// "<dir>.<Name>", dir relative to the root checked, with slashes.
type allowLists struct {
	params  map[string]string // rule A1/last-param-options
	results map[string]string // rule A1/result-shape
}

// violation is one break of a checked rule.
type violation struct {
	check string // a key of checks
	pos   token.Position
	name  string // the identifier, or the fragment of a message, at fault
	msg   string
}

// String is the failure as TestConventions reports it: rule, place, message.
func (v violation) String() string {
	rule, _, _ := strings.Cut(v.check, "/")
	return rule + " " + v.pos.String() + ": " + v.msg
}

func joinViolations(vs []violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintln(&b, v)
	}
	return b.String()
}

// checkConventions runs every check over the library packages under root. It
// returns what they found, and the allow-list entries that exempted
// something, as "<list> <key>".
func checkConventions(root string, lists allowLists) ([]violation, map[string]bool, error) {
	c := &conventionChecker{fset: token.NewFileSet(), lists: lists, used: map[string]bool{}}
	dirs, err := libraryDirs(root)
	if err != nil {
		return nil, nil, err
	}
	for _, dir := range dirs {
		files, err := parseLibrary(c.fset, dir)
		if err != nil {
			return nil, nil, err
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return nil, nil, err
		}
		c.checkPackage(filepath.ToSlash(rel), files)
	}
	return c.found, c.used, nil
}

// libraryDirs are the packages under root CONTRIBUTING.md's checked rules
// apply to: every non-test package but root itself, the example mains, the
// e2e module, hack and testdata.
func libraryDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".":
			return nil
		case rel == "testing/e2e", rel == "example", strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", d.Name() == "hack":
			return filepath.SkipDir
		}
		if m, _ := filepath.Glob(filepath.Join(path, "*.go")); len(m) > 0 {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs, err
}

// parseLibrary parses the non-test files of dir, with comments.
func parseLibrary(fset *token.FileSet, dir string) ([]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
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
	case *ast.IndexListExpr:
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

// fieldTypes are the types of a parameter or result list, one per value.
func fieldTypes(l *ast.FieldList) []ast.Expr {
	if l == nil {
		return nil
	}
	var exprs []ast.Expr
	for _, p := range l.List {
		for range max(len(p.Names), 1) {
			exprs = append(exprs, p.Type)
		}
	}
	return exprs
}

type conventionChecker struct {
	fset  *token.FileSet
	lists allowLists
	used  map[string]bool
	found []violation

	// Of the package being checked:
	dir        string          // relative to the root, with slashes
	validates  map[string]bool // types with a Validate method
	interfaces map[string]bool // interface types it declares
	shaped     bool            // whether rule A1/result-shape applies
}

// report records a violation of check at n.
func (c *conventionChecker) report(check string, n ast.Node, name, format string, args ...any) {
	if !slices.Contains(checks, check) {
		panic("conventions: unlisted check " + check)
	}
	c.found = append(c.found, violation{check: check, pos: c.fset.Position(n.Pos()), name: name, msg: fmt.Sprintf(format, args...)})
}

// exempt says whether list exempts name of the package being checked, and
// marks the entry used.
func (c *conventionChecker) exempt(list string, m map[string]string, name string) bool {
	key := c.dir + "." + name
	if _, ok := m[key]; !ok {
		return false
	}
	c.used[list+" "+key] = true
	return true
}

func (c *conventionChecker) checkPackage(dir string, files []*ast.File) {
	c.dir = dir
	c.validates = map[string]bool{}
	c.interfaces = map[string]bool{}
	// Rule A1's result shape is the promise of the public API: internal
	// packages and mains are not held to it.
	c.shaped = !slices.Contains(strings.Split(dir, "/"), "internal")
	for _, f := range files {
		if f.Name.Name == "main" {
			c.shaped = false
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.Name == "Validate" {
					c.validates[receiverName(d)] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if s, ok := s.(*ast.TypeSpec); ok {
						if _, ok := s.Type.(*ast.InterfaceType); ok {
							c.interfaces[s.Name.Name] = true
						}
					}
				}
			}
		}
	}
	for _, f := range files {
		c.checkFile(f)
	}
}

func (c *conventionChecker) checkFile(f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			c.checkFunc(d)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					name := s.Name.Name
					if d.Doc == nil && s.Doc == nil {
						c.report("A8/type-doc", s, name, "exported type %s has no doc comment", name)
					}
					if name == "Option" {
						c.report("A1/option-type", s, name, "type Option: functional options are not used; expected an Options struct")
					}
					if strings.HasSuffix(name, "Config") && !c.validates[name] {
						c.report("A2/config-validate", s, name, "type %s has no Validate method: expected a Config to be a file's or a run's typed form, with Validate", name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if !n.IsExported() {
							continue
						}
						if d.Doc == nil && s.Doc == nil && s.Comment == nil {
							c.report("A8/value-doc", n, n.Name, "exported %s has no doc comment", n.Name)
						}
						if strings.HasPrefix(n.Name, "Default") {
							c.report("A5/exported-default", n, n.Name, "exported default %s: expected an unexported constant, its value stated in the field's doc", n.Name)
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
				c.report("E1/message", lit, bad, "message %q says %q: expected \": expected\"", cutMessage(s), bad)
			}
		}
		return true
	})
}

func (c *conventionChecker) checkFunc(fn *ast.FuncDecl) {
	recv := receiverName(fn)
	if !fn.Name.IsExported() || (recv != "" && !ast.IsExported(recv)) {
		return
	}
	name := fn.Name.Name
	if recv != "" {
		name = recv + "." + name
	}
	if fn.Doc == nil {
		c.report("A8/func-doc", fn, name, "exported %s has no doc comment", name)
	}
	if recv == "" && strings.HasPrefix(fn.Name.Name, "With") {
		c.report("A1/functional-option", fn, name, "%s is a functional option: expected a field of an Options struct", name)
	}
	var params []string
	for _, p := range fieldTypes(fn.Type.Params) {
		params = append(params, typeName(p))
	}
	isNew := recv == "" && strings.HasPrefix(fn.Name.Name, "New")
	for i, ty := range params {
		if !strings.HasSuffix(ty, "Options") {
			continue
		}
		if !isNew {
			c.report("A2/options-input", fn, name, "%s takes %s: expected Options only as a constructor's input (a pure function takes <Func>Input)", name, ty)
		} else if i != len(params)-1 {
			c.report("A1/options-last", fn, name, "%s takes %s before other parameters: expected the options struct last", name, ty)
		}
	}
	if isNew && len(params) > 0 && !strings.HasSuffix(params[len(params)-1], "Options") && !c.exempt("constructorExceptions", c.lists.params, name) {
		c.report("A1/last-param-options", fn, name, "constructor %s(%s): expected its last parameter to be an Options struct", name, strings.Join(params, ", "))
	}
	if isNew && c.shaped && !c.constructorShaped(fn) && !c.exempt("valueConstructors", c.lists.results, name) {
		var results []string
		for _, r := range fieldTypes(fn.Type.Results) {
			results = append(results, types.ExprString(r))
		}
		c.report("A1/result-shape", fn, name, "constructor %s.%s returns (%s): expected (*X, error), X the type it builds, or a value constructor allow-listed with its reason in valueConstructors", c.dir, name, strings.Join(results, ", "))
	}
}

// constructorShaped says whether fn returns two results, a pointer or an
// interface the package declares first and error second. An interface of
// another package cannot be told from other types without type-checking,
// so it is refused; allow-list it.
func (c *conventionChecker) constructorShaped(fn *ast.FuncDecl) bool {
	r := fieldTypes(fn.Type.Results)
	if len(r) != 2 {
		return false
	}
	if id, ok := r[1].(*ast.Ident); !ok || id.Name != "error" {
		return false
	}
	switch first := r[0].(type) {
	case *ast.StarExpr:
		return true
	case *ast.Ident, *ast.IndexExpr, *ast.IndexListExpr:
		return c.interfaces[typeName(first)]
	}
	return false
}

func cutMessage(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
