package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tools is the folder of the apidiff the tests install, once per test
// binary.
var (
	tools      string
	apidiffBin struct {
		once sync.Once
		path string
		err  error
	}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "apicompat-test-")
	if err != nil {
		panic(err)
	}
	tools = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// apidiff returns the pinned apidiff, installed by the first call.
func apidiff(t *testing.T) string {
	t.Helper()
	apidiffBin.once.Do(func() {
		apidiffBin.path, apidiffBin.err = installApidiff(t.Context(), tools)
	})
	if apidiffBin.err != nil {
		t.Fatal(apidiffBin.err)
	}
	return apidiffBin.path
}

// gitRun runs git in dir, as a committer of its own.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// write writes the files (path to content; "" removes the file) under dir.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if text == "" {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const changelogHead = "# Changelog\n\n## [Unreleased]\n\n"

// release01 is the throwaway module's v0.1.0: a root package, a package
// with what the next version breaks, a package the next version removes,
// an internal package and a command.
var release01 = map[string]string{
	"go.mod": "module example.com/m\n\ngo 1.26\n",
	"m.go":   "// Package m is the root.\npackage m\n\n// Root stays.\nfunc Root() {}\n",
	"lib/lib.go": `// Package lib changes.
package lib

// Gone is removed.
func Gone() {}

// Sig gets a parameter.
func Sig(a int) {}

// Cfg loses a field.
type Cfg struct {
	Keep int
	Drop string
}

// T loses a method.
type T struct{}

// M is removed.
func (t *T) M() {}

// Keep stays.
func (t *T) Keep() {}
`,
	"lib/sub/sub.go":    "// Package sub is removed.\npackage sub\n\n// S goes with it.\nfunc S() {}\n",
	"internal/x/x.go":   "// Package x is internal.\npackage x\n\n// X is removed, which breaks no user.\nfunc X() {}\n",
	"cmd/tool/main.go":  "// Command tool is a command.\npackage main\n\n// Exported is removed, which breaks no user.\nfunc Exported() {}\n\nfunc main() { Exported() }\n",
	"CHANGELOG.md":      changelogHead + "## [0.1.0] - 2026-01-01\n\n- First.\n",
	"lib/sub/extra.txt": "not Go\n",
}

// next is the working tree after v0.1.0: three breaks in lib, lib/sub
// removed, a function added, and changes to the internal package and the
// command that are no API.
var next = map[string]string{
	"lib/lib.go": `// Package lib changes.
package lib

// Sig gets a parameter.
func Sig(a int, b string) {}

// Cfg loses a field.
type Cfg struct {
	Keep int
}

// T loses a method.
type T struct{}

// Keep stays.
func (t *T) Keep() {}

// New is added.
func New() *T { return &T{} }
`,
	"lib/sub/sub.go":    "",
	"lib/sub/extra.txt": "",
	"internal/x/x.go":   "// Package x is internal.\npackage x\n\n// Y replaces X.\nfunc Y() {}\n",
	"cmd/tool/main.go":  "// Command tool is a command.\npackage main\n\nfunc main() {}\n",
}

// TestCheck runs the check on a throwaway module tagged v0.1.0 and changed
// since: each break is reported, the internal package and the command are
// left out, and the CHANGELOG passes only when it names every break.
func TestCheck(t *testing.T) {
	bin := apidiff(t)
	repo := t.TempDir()
	write(t, repo, release01)
	gitRun(t, repo, "init", "-q")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "v0.1.0")
	gitRun(t, repo, "tag", "-a", "v0.1.0", "-m", "v0.1.0")

	check := func(t *testing.T) (string, error) {
		t.Helper()
		var out bytes.Buffer
		err := run(t.Context(), config{dir: repo, apidiff: bin, out: &out})
		t.Logf("report:\n%s", out.String())
		return out.String(), err
	}
	// missing returns the names the check asks CHANGELOG.md for.
	missing := func(t *testing.T, err error) []string {
		t.Helper()
		var ue *unnamedError
		if !errors.As(err, &ue) {
			t.Fatalf("check: %v, want the CHANGELOG's unnamed breaks", err)
		}
		var got []string
		for _, c := range ue.missing {
			got = append(got, names(c)[0])
		}
		slices.Sort(got)
		return got
	}

	t.Run("at the tag", func(t *testing.T) {
		out, err := check(t)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "no change in the exported API") {
			t.Errorf("report does not say there is no change")
		}
	})

	write(t, repo, next)
	t.Run("breaks unnamed", func(t *testing.T) {
		out, err := check(t)
		want := []string{"lib.Cfg.Drop", "lib.Gone", "lib.Sig", "lib.T.M", "lib/sub"}
		if diff := cmp.Diff(want, missing(t, err)); diff != "" {
			t.Errorf("unnamed breaks (-want +got):\n%s", diff)
		}
		for _, line := range []string{
			"  example.com/m/lib\n",
			"incompatible: (*T).M: removed\n",
			"incompatible: Cfg.Drop: removed\n",
			"incompatible: Gone: removed\n",
			"incompatible: Sig: changed from func(int) to func(int, string)\n",
			"compatible:   New: added\n",
			"  example.com/m/lib/sub\n    incompatible: package removed\n",
			"5 incompatible and 1 compatible changes",
		} {
			if !strings.Contains(out, line) {
				t.Errorf("report lacks %q", line)
			}
		}
		for _, no := range []string{"internal/x", "cmd/tool", "Exported"} {
			if strings.Contains(out, no) {
				t.Errorf("report shows %q, which has no API", no)
			}
		}
	})

	named := "- `lib.Gone` and `lib/sub` are removed.\n- `(*lib.T).M` is removed, and `Cfg.Drop`.\n- `lib.Sig(a, b)` takes b.\n"
	t.Run("all named", func(t *testing.T) {
		write(t, repo, map[string]string{"CHANGELOG.md": changelogHead + "### Removed (breaking)\n\n" + named +
			"\n## [0.1.0] - 2026-01-01\n"})
		if _, err := check(t); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("one unnamed", func(t *testing.T) {
		other := strings.Replace(named, "`Cfg.Drop`", "`other.Cfg.Drop`", 1)
		write(t, repo, map[string]string{"CHANGELOG.md": changelogHead + other + "\n## [0.1.0] - 2026-01-01\n"})
		_, err := check(t)
		if diff := cmp.Diff([]string{"lib.Cfg.Drop"}, missing(t, err)); diff != "" {
			t.Errorf("unnamed breaks (-want +got):\n%s", diff)
		}
	})

	t.Run("named below the tag's section", func(t *testing.T) {
		write(t, repo, map[string]string{"CHANGELOG.md": changelogHead + "## [0.1.0] - 2026-01-01\n\n" + named})
		_, err := check(t)
		if got := len(missing(t, err)); got != 5 {
			t.Errorf("%d breaks unnamed, want all 5: only the part above ## [0.1.0] counts", got)
		}
	})

	t.Run("release not yet tagged", func(t *testing.T) {
		write(t, repo, map[string]string{"CHANGELOG.md": changelogHead + "## [0.2.0] - 2026-02-01\n\n" + named +
			"\n## [0.1.0] - 2026-01-01\n"})
		if _, err := check(t); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("no section for the tag", func(t *testing.T) {
		write(t, repo, map[string]string{"CHANGELOG.md": changelogHead + named})
		_, err := check(t)
		if err == nil || !strings.Contains(err.Error(), "no section ## [0.1.0]") {
			t.Errorf("check: %v, want an error naming the missing ## [0.1.0]", err)
		}
	})
}

// TestNoTag checks that a clone without tags, or a shallow one, fails
// saying how to fetch the history, rather than passing unchecked.
func TestNoTag(t *testing.T) {
	repo := t.TempDir()
	write(t, repo, map[string]string{"go.mod": "module example.com/m\n\ngo 1.26\n"})
	gitRun(t, repo, "init", "-q")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "one")
	gitRun(t, repo, "commit", "-q", "--allow-empty", "-m", "two")
	untagged := run(t.Context(), config{dir: repo, out: new(bytes.Buffer)})

	gitRun(t, repo, "tag", "-a", "v0.1.0", "-m", "v0.1.0", "HEAD~1")
	shallow := filepath.Join(t.TempDir(), "shallow")
	gitRun(t, repo, "clone", "-q", "--depth", "1", "file://"+repo, shallow)
	shallowErr := run(t.Context(), config{dir: shallow, out: new(bytes.Buffer)})

	for name, err := range map[string]error{"untagged": untagged, "shallow": shallowErr} {
		if err == nil || !strings.Contains(err.Error(), "git fetch --tags --unshallow") {
			t.Errorf("%s clone: %v, want an error saying to run git fetch --tags --unshallow", name, err)
		}
	}
}

// TestReleaseCommit checks that a clone without tags (a CI checkout of one
// branch) finds the last release by its release commit's subject, and that
// a tag, when there is one, wins.
func TestReleaseCommit(t *testing.T) {
	repo := t.TempDir()
	write(t, repo, map[string]string{"go.mod": "module example.com/m\n\ngo 1.26\n"})
	gitRun(t, repo, "init", "-q")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "one")
	gitRun(t, repo, "commit", "-q", "--allow-empty", "-m", "Release v0.1.0")
	gitRun(t, repo, "commit", "-q", "--allow-empty", "-m", "Release v0.2.0: not the subject's form")
	gitRun(t, repo, "commit", "-q", "--allow-empty", "-m", "three")
	want := strings.TrimSpace(gitRun(t, repo, "rev-parse", "HEAD~2"))
	name, rev, err := lastTag(t.Context(), repo)
	if err != nil || name != "v0.1.0" || rev != want {
		t.Errorf("lastTag without tags = %q, %q, %v; want v0.1.0, %s (the release commit), nil", name, rev, err, want)
	}
	gitRun(t, repo, "tag", "-a", "v0.1.1", "-m", "v0.1.1", "HEAD~1")
	name, rev, err = lastTag(t.Context(), repo)
	if err != nil || name != "v0.1.1" || rev != "v0.1.1" {
		t.Errorf("lastTag with a tag = %q, %q, %v; want the tag v0.1.1", name, rev, err)
	}
}

// TestNamed checks the CHANGELOG's rule of naming, on single spans.
func TestNamed(t *testing.T) {
	table := change{rel: "checkpoint/leasetable", pkg: "github.com/weirstream/weir/checkpoint/leasetable", name: "leasetable", ident: "Table"}
	field := change{rel: "source/kinesis", pkg: "github.com/weirstream/weir/source/kinesis", name: "kinesis", ident: "Config.StartAfter"}
	method := change{rel: "stream", pkg: "github.com/weirstream/weir/stream", name: "stream", ident: "Stream.Map"}
	pkg := change{rel: "status/browsertest", pkg: "github.com/weirstream/weir/status/browsertest", name: "browsertest"}
	for _, tc := range []struct {
		c    change
		text string
		want bool
	}{
		{table, "`leasetable.Table` is removed", true},
		{table, "`checkpoint/leasetable.Table`", true},
		{table, "`*leasetable.Table`", true},
		{table, "`[]leasetable.Table`", true},
		{table, "`leasetable.Table{}`", true},
		{table, "leasetable.Table, without backquotes", false},
		{table, "`Table`", false},
		{table, "`leasetable.TableConfig`", false},
		{table, "`leasetable.Table.Close`", false},
		{table, "`xleasetable.Table`", false},
		{field, "`Config.StartAfter`", true},
		{field, "`kinesis.Config.StartAfter`", true},
		{field, "`leasetable.Config.StartAfter`", false},
		{field, "`Config.StartAfterSeq`", false},
		{field, "`StartAfter`", false},
		{method, "`(*stream.Stream[T]).Map`", true},
		{method, "`Stream[T].Map(f)`", true},
		{method, "`stream.Map`", false},
		{pkg, "`status/browsertest` moved", true},
		{pkg, "`github.com/weirstream/weir/status/browsertest`", true},
		{pkg, "`status`", false},
		{pkg, "`x/status/browsertest`", false},
		{pkg, "`status/browsertest/more`", false},
		{pkg, "`browsertest`", false},
	} {
		if got := len(unnamed([]change{tc.c}, tc.text)) == 0; got != tc.want {
			t.Errorf("does %q name %s %q? got %v, want %v", tc.text, tc.c.pkg, tc.c.ident, got, tc.want)
		}
	}
}

// TestParseChange checks the reading of apidiff's messages in module mode.
func TestParseChange(t *testing.T) {
	old := side{module: "example.com/m", pkgs: map[string]pkgInfo{
		"example.com/m":         {name: "m"},
		"example.com/m/a":       {name: "a"},
		"example.com/m/a/b":     {name: "b"},
		"example.com/m/a/b.c/d": {name: "d"},
	}}
	for _, tc := range []struct {
		msg  string
		want change
	}{
		{"./a.F: removed", change{rel: "a", pkg: "example.com/m/a", name: "a", ident: "F", message: "F: removed"}},
		{"./a/b.T.Field: removed", change{rel: "a/b", pkg: "example.com/m/a/b", name: "b", ident: "T.Field", message: "T.Field: removed"}},
		{"./a/b.(*S[K, V]).M: changed from func() to func(int)", change{rel: "a/b", pkg: "example.com/m/a/b", name: "b", ident: "S.M", message: "(*S[K, V]).M: changed from func() to func(int)"}},
		{"./a/b.c/d.X: removed", change{rel: "a/b.c/d", pkg: "example.com/m/a/b.c/d", name: "d", ident: "X", message: "X: removed"}},
		{"R: removed", change{rel: "", pkg: "example.com/m", name: "m", ident: "R", message: "R: removed"}},
		{"./a.(*T).M, method set of *U: removed", change{rel: "a", pkg: "example.com/m/a", name: "a", ident: "T.M", message: "(*T).M, method set of *U: removed"}},
		{"package example.com/m/a/b: removed", change{rel: "a/b", pkg: "example.com/m/a/b", name: "b", message: "package removed"}},
		{"example.com/other/p.E.M: removed", change{rel: "example.com/other/p", pkg: "example.com/other/p", name: "p", ident: "E.M", message: "E.M: removed"}},
	} {
		got, err := parseReport("Incompatible changes:\n- "+tc.msg+"\n", old, old)
		if err != nil {
			t.Errorf("%q: %v", tc.msg, err)
			continue
		}
		if diff := cmp.Diff([]change{tc.want}, got, cmp.AllowUnexported(change{})); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.msg, diff)
		}
	}
	if _, err := parseReport("Incompatible changes:\nsomething else\n", old, old); err == nil {
		t.Error("a line apidiff does not print was read without error")
	}
}
