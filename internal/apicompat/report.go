package main

import (
	"cmp"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"
)

// change is one change apidiff reports.
type change struct {
	rel        string // the package's path in the module: "checkpoint/leasetable"; "" for the module's root package
	pkg        string // the package's import path
	name       string // the package's name, as in its package clause
	ident      string // what changed, in the package, without pointers and type parameters: "Table", "Config.StartAfter", "Table.Close"; "" for the whole package
	message    string // apidiff's message, relative to the package: "(*Table).Close: removed"
	compatible bool
}

// parseReport reads the report of apidiff -m on the two sides, leaving out
// the changes of commands.
func parseReport(text string, old, new side) ([]change, error) {
	known := map[string]pkgInfo{} // by path in the module
	for _, s := range []side{old, new} {
		for p, info := range s.pkgs {
			rel := relPath(p, s.module)
			if prev, ok := known[rel]; ok {
				info.main = info.main || prev.main
			}
			known[rel] = info
		}
	}
	var changes []change
	compatible, inList := false, false
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "Incompatible changes:":
			compatible, inList = false, true
		case line == "Compatible changes:":
			compatible, inList = true, true
		case inList && strings.HasPrefix(line, "- "):
			c, err := parseChange(strings.TrimPrefix(line, "- "), old, new, known)
			if err != nil {
				return nil, err
			}
			c.compatible = compatible
			if !known[c.rel].main {
				changes = append(changes, c)
			}
		default:
			return nil, fmt.Errorf("apidiff %s printed a line apicompat cannot read: %q", apidiffVersion, line)
		}
	}
	return changes, nil
}

// parseChange reads one of apidiff's messages. In module mode, a message is
// "package IMPORTPATH: added" or "removed" for a whole package, and
// "OBJECT[.PART][, method set of T]: what" for the rest, where OBJECT is
// "./PATH.Name" or "./PATH.(*Type).Method" (no "./PATH." in the module's
// root package; a full import path outside the module).
func parseChange(msg string, old, new side, known map[string]pkgInfo) (change, error) {
	subject, what, ok := strings.Cut(msg, ": ")
	if !ok {
		return change{}, fmt.Errorf("apidiff %s printed a change apicompat cannot read: %q", apidiffVersion, msg)
	}
	if p, ok := strings.CutPrefix(subject, "package "); ok {
		rel := relPath(p, old.module)
		if what == "added" {
			rel = relPath(p, new.module)
		}
		return change{rel: rel, pkg: p, name: pkgName(rel, p, known), message: "package " + what}, nil
	}
	obj, part, _ := strings.Cut(subject, ", method set of ")
	var rel, rest string
	switch {
	case strings.HasPrefix(obj, "./"):
		obj = obj[2:]
		for p := range known {
			if len(p) > len(rel) && strings.HasPrefix(obj, p+".") {
				rel = p
			}
		}
		if rel == "" { // a package go list did not report: its path ends at the first dot after the last slash
			slash := strings.LastIndex(obj, "/")
			rel = obj[:slash+1+strings.Index(obj[slash+1:], ".")]
		}
		rest = obj[len(rel)+1:]
	case strings.Contains(obj, "/"): // outside the module (a method promoted from an embedded type)
		slash := strings.LastIndex(obj, "/")
		dot := slash + 1 + strings.Index(obj[slash+1:], ".")
		rel, rest = obj[:dot], obj[dot+1:]
	default:
		rest = obj
	}
	imp := rel
	if _, ok := known[rel]; ok {
		imp = strings.TrimSuffix(cmp.Or(new.module, old.module)+"/"+rel, "/")
	}
	if part != "" {
		part = ", method set of " + part
	}
	return change{rel: rel, pkg: imp, name: pkgName(rel, imp, known), ident: normalize(rest), message: rest + part + ": " + what}, nil
}

// relPath returns the path of package p in module mod.
func relPath(p, mod string) string {
	if p == mod {
		return ""
	}
	return strings.TrimPrefix(p, mod+"/")
}

// pkgName returns the name of the package at rel in the module, or the last
// element of its import path.
func pkgName(rel, imp string, known map[string]pkgInfo) string {
	if info, ok := known[rel]; ok && info.name != "" {
		return info.name
	}
	return path.Base(imp)
}

// typeArgs matches a list of type parameters or arguments, or a slice's or
// array's brackets.
var typeArgs = regexp.MustCompile(`\[[^\[\]]*\]`)

// normalize writes a method, field or type the one way the CHANGELOG check
// compares them: without pointers, the parentheses around a pointer
// receiver and type parameters, so "(*Stream[T]).Map" is "Stream.Map".
func normalize(s string) string {
	for {
		t := typeArgs.ReplaceAllString(s, "")
		if t == s {
			break
		}
		s = t
	}
	return strings.NewReplacer("(*", "", "*", "", ")", "").Replace(s)
}

// writeReport writes the changes to w, package by package, and returns the
// incompatible ones.
func writeReport(w io.Writer, changes []change) []change {
	slices.SortStableFunc(changes, func(a, b change) int {
		return cmp.Or(strings.Compare(a.rel, b.rel), compareBool(a.compatible, b.compatible))
	})
	var breaks []change
	for i, c := range changes {
		if i == 0 || c.rel != changes[i-1].rel {
			fmt.Fprintf(w, "  %s\n", c.pkg)
		}
		kind := "compatible:  "
		if !c.compatible {
			kind = "incompatible:"
			breaks = append(breaks, c)
		}
		fmt.Fprintf(w, "    %s %s\n", kind, c.message)
	}
	if len(changes) == 0 {
		fmt.Fprintln(w, "apicompat: no change in the exported API")
	} else {
		fmt.Fprintf(w, "apicompat: %d incompatible and %d compatible changes\n", len(breaks), len(changes)-len(breaks))
	}
	return breaks
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
