package main

import (
	"fmt"
	"regexp"
	"strings"
)

// The CHANGELOG rule (RELEASING.md says it for contributors): an
// incompatible change is named when a code span (`...`) in the part of
// CHANGELOG.md above the tag's own section holds
//
//   - for a removed package, its path in the module (`status/browsertest`)
//     or its import path;
//   - for a package-level name, the name qualified by its package's name:
//     `leasetable.Table`;
//   - for a field or method, that qualified form (`kinesis.Config.StartAfter`)
//     or the type's name and the member's: `Config.StartAfter`.
//
// The name must stand whole: `leasetable.TableConfig` does not name
// leasetable.Table, `leasetable.Table.Close` names the method, not the
// type, and `leasetable.Config.StartAfter` does not name kinesis's.
// Pointers, the parentheses of a method's receiver and type parameters are
// ignored: `(*stream.Stream[T]).Map` names stream.Stream.Map.

// codeSpan matches a Markdown code span.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// sinceRelease returns the part of the changelog above the section of the
// release tag (## [0.2.0] for v0.2.0): the Unreleased section, and the
// section of a release whose tag is not yet made.
func sinceRelease(log, tag string) (string, error) {
	heading := "## [" + strings.TrimPrefix(tag, "v") + "]"
	var b strings.Builder
	for line := range strings.Lines(log) {
		if strings.HasPrefix(line, heading) {
			return b.String(), nil
		}
		b.WriteString(line)
	}
	return "", fmt.Errorf("CHANGELOG.md has no section %s for the tag %s the API is compared with "+
		"(the breaks since a release are looked for above its section): add it, or tag the release it names", heading, tag)
}

// unnamed returns the changes that text does not name.
func unnamed(changes []change, text string) []change {
	var spans []string
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		spans = append(spans, normalize(m[1]))
	}
	var missing []change
	for _, c := range changes {
		if !named(c, spans) {
			missing = append(missing, c)
		}
	}
	return missing
}

// named reports whether one of spans names c.
func named(c change, spans []string) bool {
	forms, inName := names(c), isIdentByte
	if c.ident == "" {
		inName = isPathByte
	}
	for _, span := range spans {
		for _, f := range forms {
			if containsWhole(span, f, inName) {
				return true
			}
		}
	}
	return false
}

// names returns the forms that name c, the one to suggest first.
func names(c change) []string {
	if c.ident == "" {
		return []string{c.rel, c.pkg}
	}
	forms := []string{c.name + "." + c.ident}
	if strings.Contains(c.ident, ".") {
		forms = append(forms, c.ident)
	}
	return forms
}

// containsWhole reports whether s holds w with no byte of a name (inName)
// right before or after it. (A slash is no byte of a Go name, so a
// package's path may qualify one: `checkpoint/leasetable.Table`.)
func containsWhole(s, w string, inName func(byte) bool) bool {
	for i := 0; w != ""; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(w)
		if (j == 0 || !inName(s[j-1])) && (end == len(s) || !inName(s[end])) {
			return true
		}
		i = j + 1
	}
	return false
}

// isIdentByte reports whether b can be part of a dotted Go name.
func isIdentByte(b byte) bool {
	return b == '_' || b == '.' || b >= 0x80 || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

// isPathByte reports whether b can be part of an import path.
func isPathByte(b byte) bool {
	return isIdentByte(b) || b == '/' || b == '-' || b == '~'
}

// unnamedError lists the incompatible changes CHANGELOG.md does not name.
type unnamedError struct {
	tag     string
	breaks  int
	missing []change
}

func (e *unnamedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CHANGELOG.md names %d of the %d incompatible changes since %s. "+
		"Name each of these in backquotes in CHANGELOG.md's ## [Unreleased] section "+
		"(under ### Changed (breaking) or ### Removed (breaking)), saying what to use instead:",
		e.breaks-len(e.missing), e.breaks, e.tag)
	for _, c := range e.missing {
		fmt.Fprintf(&b, "\n  `%s` (%s: %s)", names(c)[0], c.pkg, c.message)
	}
	return b.String()
}
