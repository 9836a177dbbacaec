// Command apicompat compares the exported API of the module's packages with
// the last release tag and checks that CHANGELOG.md names every incompatible
// change. scripts/apicompat runs it (scripts/test does, so CI does), and
// RELEASING.md says how it works and how its rule of naming reads.
//
// It finds the tag with git describe, extracts the module at that tag with
// git archive, and compares the two with golang.org/x/exp/cmd/apidiff at a
// pinned version (apidiffVersion), installed with go install into a
// temporary folder. Internal packages and commands (package main) have no
// API and are left out. The report, every change per package, goes to
// standard output; the check fails if an incompatible change is not named
// in CHANGELOG.md above the tag's own section.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

// apidiffVersion is the version of golang.org/x/exp whose cmd/apidiff does
// the comparison. The module is not a dependency of weir's: go install
// fetches it from the module proxy.
const apidiffVersion = "v0.0.0-20261113113407-e3970619a1a4"

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: apicompat [-C dir] [-apidiff path]\n"+
			"compares the exported API of the module in dir with its last release tag (v*)\n"+
			"and checks that CHANGELOG.md names every incompatible change\n")
		flag.PrintDefaults()
	}
	dir := flag.String("C", ".", "the module's root, in a git checkout holding its release tags")
	apidiff := flag.String("apidiff", "", "the apidiff binary (default: go install golang.org/x/exp/cmd/apidiff@"+apidiffVersion+" into a temporary folder)")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, config{dir: *dir, apidiff: *apidiff, out: os.Stdout})
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "apicompat: %v\n", err)
		os.Exit(1)
	}
}

// config is what one check works on.
type config struct {
	dir     string    // the module's root, in a git checkout
	apidiff string    // the apidiff binary; "" installs the pinned one
	out     io.Writer // where the report goes
}
