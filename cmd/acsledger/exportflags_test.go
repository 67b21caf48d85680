package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The built binary refuses a bad --export value before serve starts
// anything: exit 2, the message names the flag and the parameter, and
// shows no secret (issue 31's values: a password in a URL that does not
// parse, a misspelt parameter, a port out of range, an unreadable CA).
func TestServeExportValueExit2(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-Zk4"
	missingCA := filepath.Join(t.TempDir(), "missing-ca.pem")
	for _, tc := range []struct{ value, want string }{
		{"siem=http://user:" + secret + "@%zz", "--export siem (http://REDACTED@%zz): not a URL: a bad %-escape"},
		{"siem=https://siem.example/in?token=" + secret + "&tokn=" + secret, `unknown parameter "tokn" for https`},
		{"siem=syslog+tcp://127.0.0.1:99999", "port 99999: want a number from 1 to 65535"},
		{"siem=syslog+tls://127.0.0.1:6514?cafile=/etc/ssl/ca.pem", `unknown parameter "cafile" for syslog+tls`},
		{"siem=syslog+tls://127.0.0.1:6514?ca=" + missingCA, "ca=" + missingCA + ": couldn't read the CA file"},
		{"splunk=hec+https://splunk.example:8088?token=" + secret + "&index=Main", `index="Main"`},
		{"splunk=hec+https://splunk.example:8088", "token is required"},
	} {
		cmd := exec.Command(binary, "serve", "--db", t.TempDir(), "--addr", "127.0.0.1:0", "--export", tc.value)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		msg := string(out)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(msg, "acsledger serve: usage: --export ") || !strings.Contains(msg, tc.want) {
			t.Errorf("serve --export %q: %v, output:\n%s\nwant exit 2 and %q", tc.value, err, msg, tc.want)
		}
		if strings.Contains(msg, secret) {
			t.Errorf("serve --export %q printed the secret:\n%s", tc.value, msg)
		}
	}
}
