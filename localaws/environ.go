package localaws

import (
	"runtime"
	"strings"
)

// The environment of every process this package starts (npm ci and the
// servers) is an allow-list of the caller's, never all of it: the caller's
// AWS credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE...)
// and any other secret in it stay out of third-party Node code.
var (
	// baseVars are kept for every child: what Node needs to find programs,
	// a home and temporary folder, and the locale. Windows needs a few more
	// to run programs at all.
	baseVars = []string{"PATH", "HOME", "TMPDIR", "TMP", "TEMP", "TZ", "LANG", "LANGUAGE"}
	// windowsVars are kept too on Windows.
	windowsVars = []string{"SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT",
		"USERPROFILE", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA", "PROGRAMFILES"}
	// npmVars are kept for npm ci only: how it reaches a registry (proxies,
	// a corporate CA) and its own settings (npm_config_registry, cache...).
	npmVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "NODE_EXTRA_CA_CERTS"}
)

// childEnv returns the variables of environ ("KEY=value") that a child may
// see: those named in baseVars (windowsVars on Windows), the locale (LC_*),
// and, when forNPM, npmVars and npm's own npm_config_*. Names are compared
// without case, as Windows does and as proxies are spelled both ways. A
// variable named AWS_* is never kept.
func childEnv(environ []string, forNPM bool) []string {
	keep := map[string]bool{}
	for _, v := range baseVars {
		keep[v] = true
	}
	if runtime.GOOS == "windows" {
		for _, v := range windowsVars {
			keep[v] = true
		}
	}
	if forNPM {
		for _, v := range npmVars {
			keep[v] = true
		}
	}
	var env []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		switch {
		case strings.HasPrefix(upper, "AWS_"):
		case keep[upper], strings.HasPrefix(upper, "LC_"),
			forNPM && strings.HasPrefix(upper, "NPM_CONFIG_"):
			env = append(env, kv)
		}
	}
	return env
}
