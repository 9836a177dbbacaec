package localaws

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChildEnv checks the allow-list: no AWS_* variable and nothing
// unknown reaches a child; npm alone gets proxies and npm_config_*.
func TestChildEnv(t *testing.T) {
	t.Parallel()
	environ := []string{
		"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "TMPDIR=/tmp",
		"AWS_SECRET_ACCESS_KEY=canary", "AWS_ACCESS_KEY_ID=AKIA", "AWS_PROFILE=prod", "aws_session_token=x",
		"GITHUB_TOKEN=ghp", "NODE_OPTIONS=--require /tmp/evil.js",
		"https_proxy=http://proxy:3128", "NO_PROXY=localhost", "npm_config_registry=https://r.example/",
		"NPM_CONFIG_AWS_X=1",
	}
	tests := []struct {
		name   string
		forNPM bool
		want   []string
	}{
		{"server", false, []string{"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "TMPDIR=/tmp"}},
		{"npm", true, []string{"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "TMPDIR=/tmp",
			"https_proxy=http://proxy:3128", "NO_PROXY=localhost", "npm_config_registry=https://r.example/", "NPM_CONFIG_AWS_X=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, childEnv(environ, tt.forNPM)); diff != "" {
				t.Errorf("childEnv (-want +got):\n%s", diff)
			}
		})
	}
}
