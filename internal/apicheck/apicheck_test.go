package apicheck

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/weirstream/weir"

// pkg is what go list reports of a package.
type pkg struct {
	ImportPath   string
	Dir          string
	Name         string
	GoFiles      []string
	CgoFiles     []string
	TestGoFiles  []string
	XTestGoFiles []string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// list returns the module's packages, as go list reports them.
func list(t *testing.T) []pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the check needs the go command in PATH: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-e", "-json", module+"/...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package")
	}
	return pkgs
}

// internal reports whether path is an internal package (Go's rule: a path
// element named internal).
func internal(path string) bool {
	return slices.Contains(strings.Split(path, "/"), "internal")
}

// TestExamplesImportNothingInternal checks that no package under examples/
// imports, in its code or its tests, an internal package of weir: a user
// copies an example into a module of their own, where such an import does
// not compile.
func TestExamplesImportNothingInternal(t *testing.T) {
	seen := 0
	for _, p := range list(t) {
		if !strings.HasPrefix(p.ImportPath, module+"/examples/") {
			continue
		}
		seen++
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if strings.HasPrefix(imp, module+"/") && internal(imp) {
				t.Errorf("%s imports %s: examples must use weir's public API only (and the SDK's own packages)", p.ImportPath, imp)
			}
		}
	}
	if seen == 0 {
		t.Errorf("no package under %s/examples/", module)
	}
}

// TestNoPublicTestOnlyPackage checks that no public package (not internal,
// not a command) holds tests and no code besides doc.go: such a package is
// a test, not API, and belongs under an internal folder. (The module's root
// package, documentation only, has no tests.)
func TestNoPublicTestOnlyPackage(t *testing.T) {
	for _, p := range list(t) {
		if internal(p.ImportPath) || p.Name == "main" {
			continue
		}
		code := slices.DeleteFunc(slices.Concat(p.GoFiles, p.CgoFiles), func(f string) bool { return f == "doc.go" })
		tests := slices.Concat(p.TestGoFiles, p.XTestGoFiles)
		if len(code) == 0 && len(tests) > 0 {
			t.Errorf("%s holds only tests (%s) and no code besides doc.go: move it under an internal folder",
				p.ImportPath, strings.Join(tests, ", "))
		}
	}
}

// TestDesignPackageTable checks that DESIGN.md's table of packages lists
// every package of the module, and no other, each with the packages of
// weir's it imports: for a package that holds only tests, those its tests
// import.
func TestDesignPackageTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	const header = "| package | holds | imports (of weir's) |"
	_, rest, ok := strings.Cut(string(doc), header+"\n")
	if !ok {
		t.Fatalf("DESIGN.md has no table headed %q", header)
	}
	table := map[string]string{} // package (module-relative; "weir" for the root) to its imports cell
	for line := range strings.Lines(rest) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		if len(cells) != 3 {
			t.Errorf("DESIGN.md table row %q: want 3 cells", line)
			continue
		}
		table[strings.Trim(strings.TrimSpace(cells[0]), "`")] = strings.TrimSpace(cells[2])
	}
	for _, p := range list(t) {
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if name == "" {
			name = "weir"
		}
		imports := p.Imports
		if code := slices.DeleteFunc(slices.Concat(p.GoFiles, p.CgoFiles), func(f string) bool { return f == "doc.go" }); len(code) == 0 {
			imports = slices.Concat(p.TestImports, p.XTestImports)
		}
		var weirs []string
		for _, imp := range imports {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok && imp != p.ImportPath {
				weirs = append(weirs, rel)
			}
		}
		want := cell(weirs)
		got, ok := table[name]
		delete(table, name)
		switch {
		case !ok:
			t.Errorf("DESIGN.md's package table has no row for `%s`; add one: | `%s` | what it holds | %s |", name, name, want)
		case cell(strings.Split(strings.NewReplacer("`", "", "nothing", "").Replace(got), ",")) != want:
			t.Errorf("DESIGN.md's package table says `%s` imports %s; it imports %s", name, got, want)
		}
	}
	for name := range table {
		t.Errorf("DESIGN.md's package table has a row for `%s`, which is not a package of the module", name)
	}
}

// cell returns the imports column of DESIGN.md's table for the packages
// names, in any order and possibly repeated: "nothing", or the sorted names
// in backquotes, comma-separated.
func cell(names []string) string {
	var set []string
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			set = append(set, n)
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)
	if len(set) == 0 {
		return "nothing"
	}
	return "`" + strings.Join(set, "`, `") + "`"
}

// TestNoPublicAliasOfInternalType checks that no public package declares a
// type as an alias of an internal package's type (type Env = internal.Env):
// go doc shows such a type without its fields' docs and methods, and a user
// cannot follow it to the internal package.
func TestNoPublicAliasOfInternalType(t *testing.T) {
	for _, p := range list(t) {
		if internal(p.ImportPath) || p.Name == "main" {
			continue
		}
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			imports := map[string]string{} // name in the file to import path
			for _, imp := range f.Imports {
				ipath := strings.Trim(imp.Path.Value, `"`)
				local := ipath[strings.LastIndex(ipath, "/")+1:]
				if imp.Name != nil {
					local = imp.Name.Name
				}
				imports[local] = ipath
			}
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok || !ts.Assign.IsValid() || !ts.Name.IsExported() {
					return true
				}
				if sel, ok := ts.Type.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && internal(imports[x.Name]) {
						t.Errorf("%s: type %s = %s.%s aliases a type of internal package %s: define the type in %s",
							path, ts.Name.Name, x.Name, sel.Sel.Name, imports[x.Name], p.ImportPath)
					}
				}
				return true
			})
		}
	}
}
