// Package doccheck compiles the Go code blocks of the repository's Markdown
// documents (README.md, DESIGN.md, docs/*.md), so that a snippet a user
// copies builds against the current API. The package has no API: everything
// is in its test.
package doccheck
