package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// run compares the API of the module in cfg.dir with its last release tag,
// writes the report to cfg.out and checks CHANGELOG.md.
func run(ctx context.Context, cfg config) error {
	dir, err := filepath.Abs(cfg.dir)
	if err != nil {
		return err
	}
	tag, rev, err := lastTag(ctx, dir)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "apicompat-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := cfg.apidiff
	if bin == "" {
		if bin, err = installApidiff(ctx, tmp); err != nil {
			return err
		}
	}
	old := filepath.Join(tmp, "old")
	if err := extract(ctx, dir, rev, old); err != nil {
		return err
	}
	oldSide, err := load(ctx, bin, old, filepath.Join(tmp, "old.x"))
	if err != nil {
		return fmt.Errorf("the module at %s: %w", tag, err)
	}
	newSide, err := load(ctx, bin, dir, filepath.Join(tmp, "new.x"))
	if err != nil {
		return fmt.Errorf("the working tree: %w", err)
	}
	text, err := command(ctx, tmp, bin, "-m", oldSide.export, newSide.export)
	if err != nil {
		return err
	}
	changes, err := parseReport(text, oldSide, newSide)
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.out, "apicompat: the exported API of %s at %s against the working tree (apidiff %s; internal packages and commands left out)\n",
		newSide.module, tag, apidiffVersion)
	breaks := writeReport(cfg.out, changes)
	if len(breaks) == 0 {
		fmt.Fprintf(cfg.out, "apicompat: no incompatible change since %s, nothing for CHANGELOG.md to name\n", tag)
		return nil
	}
	log, err := os.ReadFile(filepath.Join(dir, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	section, err := sinceRelease(string(log), tag)
	if err != nil {
		return err
	}
	if missing := unnamed(breaks, section); len(missing) > 0 {
		return &unnamedError{tag: tag, missing: missing, breaks: len(breaks)}
	}
	fmt.Fprintf(cfg.out, "apicompat: CHANGELOG.md names each of the %d incompatible changes since %s\n", len(breaks), tag)
	return nil
}

// lastTag returns the newest release reachable from HEAD: its tag (v*), or,
// in a clone without tags (a CI checkout of one branch, say), the newest
// release commit on the first-parent history, whose subject RELEASING.md
// fixes as "Release vX.Y.Z". It returns the release's name (vX.Y.Z) and the
// revision to extract. A shallow clone, or one with neither, is an error
// saying how to fetch the history: skipping the check there would pass what
// it should fail.
func lastTag(ctx context.Context, dir string) (name, rev string, err error) {
	shallow, err := command(ctx, dir, "git", "rev-parse", "--is-shallow-repository")
	if err != nil {
		return "", "", err
	}
	if strings.TrimSpace(shallow) == "true" {
		return "", "", fmt.Errorf("%s is a shallow clone, whose history may not reach the last release tag: run git fetch --tags --unshallow", dir)
	}
	tag, tagErr := command(ctx, dir, "git", "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*")
	if tagErr == nil {
		tag = strings.TrimSpace(tag)
		return tag, tag, nil
	}
	commits, err := command(ctx, dir, "git", "log", "--first-parent", "--format=%H %s", "-E", "--grep", `^Release v[0-9]+\.[0-9]+\.[0-9]+`)
	if err != nil {
		return "", "", err
	}
	for line := range strings.Lines(commits) {
		hash, subject, _ := strings.Cut(strings.TrimSpace(line), " ")
		if version, ok := strings.CutPrefix(subject, "Release "); ok && releaseName.MatchString(version) {
			return version, hash, nil
		}
	}
	return "", "", fmt.Errorf("no release tag (v*) and no release commit (subject \"Release vX.Y.Z\") is reachable from HEAD, so there is no API to compare with: "+
		"run git fetch --tags --unshallow (a clone without its tags), or tag the first release as RELEASING.md says: %w", tagErr)
}

// releaseName is the form of a release's name in a release commit's subject.
var releaseName = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-rc\.[0-9]+)?$`)

// extract writes the files of the revision rev into dir.
func extract(ctx context.Context, repo, rev, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	archive := dir + ".tar"
	if _, err := command(ctx, repo, "git", "archive", "--format=tar", "-o", archive, rev); err != nil {
		return err
	}
	_, err := command(ctx, dir, "tar", "-x", "-f", archive)
	return err
}

// installApidiff installs the pinned apidiff into dir/bin and returns its
// path.
func installApidiff(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "bin")
	cmd := exec.CommandContext(ctx, "go", "install", "golang.org/x/exp/cmd/apidiff@"+apidiffVersion)
	cmd.Dir = dir // outside any module: go.mod and go.sum are not touched
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("could not install apidiff with go install golang.org/x/exp/cmd/apidiff@%s: "+
			"it needs the Go module proxy (GOPROXY) or the module in the module cache: %w\n%s", apidiffVersion, err, out)
	}
	name := "apidiff"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	return filepath.Join(bin, name), nil
}

// side is one of the two versions compared.
type side struct {
	module string             // the module's path
	pkgs   map[string]pkgInfo // by import path
	export string             // the file of apidiff's export data
}

// pkgInfo is what the report needs of a package.
type pkgInfo struct {
	name string // the package's name, as in its package clause
	main bool   // a command, which has no API
}

// load lists the packages of the module in dir and writes apidiff's export
// data of its API to export.
func load(ctx context.Context, apidiff, dir, export string) (side, error) {
	s := side{pkgs: map[string]pkgInfo{}, export: export}
	mod, err := command(ctx, dir, "go", "list", "-m")
	if err != nil {
		return s, err
	}
	s.module = strings.TrimSpace(mod)
	list, err := command(ctx, dir, "go", "list", "-e", "-f", "{{.ImportPath}} {{.Name}}", "./...")
	if err != nil {
		return s, err
	}
	for line := range strings.Lines(list) {
		path, name, _ := strings.Cut(strings.TrimSpace(line), " ")
		s.pkgs[path] = pkgInfo{name: name, main: name == "main"}
	}
	if _, err := command(ctx, dir, apidiff, "-m", "-w", export, s.module); err != nil {
		return s, err
	}
	return s, nil
}

// command runs name with args in dir and returns its standard output. Its
// error holds the standard error, less apidiff's notes of the internal
// packages it leaves out.
func command(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	var notes strings.Builder
	for sc := bufio.NewScanner(&stderr); sc.Scan(); {
		if !strings.HasPrefix(sc.Text(), "Ignoring internal package ") {
			fmt.Fprintf(&notes, "\n%s", sc.Text())
		}
	}
	return "", fmt.Errorf("%s %s (in %s): %w%s", filepath.Base(name), strings.Join(args, " "), dir, err, notes.String())
}
