package apicheck

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/weirstream/weir"

// pkg is what go list reports of a package.
type pkg struct {
	ImportPath   string
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
