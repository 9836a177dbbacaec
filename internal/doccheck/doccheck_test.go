package doccheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// imports maps the package names the snippets use to their import paths;
// a snippet imports each under the name it uses.
// A snippet gets the imports of the names it mentions, so the documents need
// not list them.
var imports = map[string]string{
	"batch":          "github.com/weirstream/weir/batch",
	"checkpoint":     "github.com/weirstream/weir/checkpoint",
	"deadletter":     "github.com/weirstream/weir/sink/deadletter",
	"dynamolog":      "github.com/weirstream/weir/recovery/dynamolog",
	"files":          "github.com/weirstream/weir/sink/files",
	"dynamodb":       "github.com/weirstream/weir/sink/dynamodb",
	"types":          "github.com/aws/aws-sdk-go-v2/service/dynamodb/types",
	"kinesis":        "github.com/weirstream/weir/source/kinesis",
	"kinesistest":    "github.com/weirstream/weir/source/kinesis/kinesistest",
	"leasetable":     "github.com/weirstream/weir/checkpoint/leasetable",
	"localaws":       "github.com/weirstream/weir/localaws",
	"memory":         "github.com/weirstream/weir/source/memory",
	"metrics":        "github.com/weirstream/weir/metrics",
	"kinesismetrics": "github.com/weirstream/weir/metrics/kinesismetrics",
	"collectors":     "github.com/prometheus/client_golang/prometheus/collectors",
	"recovery":       "github.com/weirstream/weir/recovery",
	"status":         "github.com/weirstream/weir/status",
	"stream":         "github.com/weirstream/weir/stream",
	"weirprom":       "github.com/weirstream/weir/metrics/prometheus",
	"prometheus":     "github.com/prometheus/client_golang/prometheus",
	"promhttp":       "github.com/prometheus/client_golang/prometheus/promhttp",
	"aws":            "github.com/aws/aws-sdk-go-v2/aws",
	"awskinesis":     "github.com/aws/aws-sdk-go-v2/service/kinesis",
	"config":         "github.com/aws/aws-sdk-go-v2/config",
	"kinesissink":    "github.com/weirstream/weir/sink/kinesis",
	"context":        "context",
	"errors":         "errors",
	"fmt":            "fmt",
	"http":           "net/http",
	"log":            "log",
	"os":             "os",
	"signal":         "os/signal",
	"slog":           "log/slog",
	"strings":        "strings",
	"syscall":        "syscall",
	"time":           "time",
}

// prelude declares, at package level, the names the snippets take as given:
// the ctx of the surrounding function, the test's t, and a Kinesis source.
// A snippet that declares one of them itself shadows it.
const prelude = `package snippet

import (
	"context"
	"testing"

	"github.com/weirstream/weir/source/kinesis"
)

var (
	ctx context.Context
	t   *testing.T
	src *kinesis.Receiver
)
`

// block is one Go code block of a document.
type block struct {
	doc  string // the document's path, relative to the repository root
	line int    // the line of the block's first line of code
	code string
}

// blocks returns the ```go blocks of the document at path.
func blocks(t *testing.T, root, path string) []block {
	t.Helper()
	f, err := os.Open(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &block{doc: path, line: n + 1}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: a ```go block is never closed", path, cur.line-1)
	}
	return out
}

var qualifier = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.[A-Za-z_]`)

// source returns the snippet as a Go file of package snippet. A block that
// declares functions or types at the start of a line is a file's body;
// any other block is the body of a function. The number of lines before the
// block's code is returned too, to map the compiler's lines back.
func (b block) source() (src string, offset int) {
	var used []string // the names, each imported as itself
	for _, m := range qualifier.FindAllStringSubmatch(b.code, -1) {
		if _, ok := imports[m[1]]; ok && !slices.Contains(used, m[1]) {
			used = append(used, m[1])
		}
	}
	slices.Sort(used)
	var sb strings.Builder
	sb.WriteString("package snippet\n\nimport (\n")
	for _, name := range used {
		fmt.Fprintf(&sb, "\t%s %q\n", name, imports[name])
	}
	sb.WriteString(")\n\n")
	topLevel := regexp.MustCompile(`(?m)^(func|type|var|const) `).MatchString(b.code)
	if !topLevel {
		sb.WriteString("func _() {\n")
	}
	offset = strings.Count(sb.String(), "\n")
	sb.WriteString(b.code)
	if !topLevel {
		sb.WriteString("}\n")
	}
	return sb.String(), offset
}

// ignored are the compiler's complaints that a fragment cannot avoid: a
// snippet shows how a value is made, not every use of it.
var ignored = regexp.MustCompile(`declared and not used|imported and not used`)

// TestDocumentsCompile builds every Go block of the documents against the
// current packages: the README's and DESIGN.md's snippets must not rot.
func TestDocumentsCompile(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{"README.md", "DESIGN.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		rel, _ := filepath.Rel(root, m)
		docs = append(docs, rel)
	}
	var all []block
	for _, d := range docs {
		all = append(all, blocks(t, root, d)...)
	}
	if len(all) == 0 {
		t.Fatal("no ```go block found in the documents; the check would check nothing")
	}
	dir := t.TempDir()
	replace := map[string]string{}
	var pkgs []string
	offsets := map[string]block{}
	for i, b := range all {
		pkg := fmt.Sprintf("./internal/doccheck/gen/s%d", i)
		src, offset := b.source()
		file := filepath.Join(dir, fmt.Sprintf("s%d.go", i))
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		pre := filepath.Join(dir, fmt.Sprintf("s%d_prelude.go", i))
		if err := os.WriteFile(pre, []byte(prelude), 0o600); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(root, "internal", "doccheck", "gen", fmt.Sprintf("s%d", i))
		replace[filepath.Join(target, "snippet.go")] = file
		replace[filepath.Join(target, "prelude.go")] = pre
		pkgs = append(pkgs, pkg)
		b.line -= offset + 1
		offsets[file] = b
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"build", "-overlay", ov, "-gcflags=-e", "-o", os.DevNull}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, _ := cmd.CombinedOutput()
	fileLine := regexp.MustCompile(`^(.*\.go):(\d+):(\d+): (.*)$`)
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, "#") || ignored.MatchString(line) {
			continue
		}
		m := fileLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("go build: %s", line)
			continue
		}
		b, ok := offsets[m[1]]
		if !ok {
			t.Errorf("go build: %s", line)
			continue
		}
		var n int
		fmt.Sscan(m[2], &n)
		t.Errorf("%s:%d: %s", b.doc, b.line+n, m[4])
	}
}
