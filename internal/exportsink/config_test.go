package exportsink_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/exportsink"
)

// The secret every bad value below plants in its userinfo or its secret
// parameters: no message may show it.
const planted = "s3cret-Qx7"

func TestExportBadValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ value, want string }{
		// What does not parse: the message says why, masked.
		{"siem=http://user:" + planted + "@%zz", "not a URL: a bad %-escape"},
		{"siem=http://user:" + planted + "@h:abc", "not a URL: the port is not a number from 1 to 65535"},
		{"siem=http://user:" + planted + "@h:1/\x7f", "not a URL: a control character"},
		{"siem=http://us er:" + planted + "@h:1", "not a URL"},
		{"siem=https://h:443/?token=" + planted + "&x=%zz", "the query does not parse"},
		{"siem=https://h:443/?token=" + planted + ";allow_tools=1", "the query does not parse"},
		{"siem=http:user:" + planted + "@h:1", "want http://HOST:PORT"},
		{"siem=alice:" + planted + "@h:1", "unknown scheme (want one of"},
		{"siem=ftp://alice:" + planted + "@h:1", "unknown scheme (want one of"},
		{"siem=//alice:" + planted + "@h:1", "no scheme"},
		{"siem=https://alice:" + planted + "@h:1/#" + planted, "a #fragment means nothing here"},
		{"https://alice:" + planted + "@h:1/?token=" + planted, "want NAME=URL"},
		{"bad name=https://alice:" + planted + "@h:1/?token=" + planted, "want NAME=URL"},
		// Ports.
		{"siem=syslog+tcp://127.0.0.1:99999", "port 99999: want a number from 1 to 65535"},
		{"siem=https://alice:" + planted + "@h:0/?token=" + planted, "port 0: want a number from 1 to 65535"},
		{"siem=hec+https://splunk:65536?token=" + planted, "port 65536"},
		{"siem=http://h:/x", `the port after "h" is empty`},
		{"siem=relp://h", "want relp://HOST:PORT with a port"},
		{"siem=hec+https://splunk?token=" + planted, "want hec+https://HOST:PORT with a port"},
		// Parameters: unknown, misspelt, twice, or not the scheme's.
		{"siem=syslog+tls://127.0.0.1:6514?cafile=/etc/ca.pem", `unknown parameter "cafile" for syslog+tls (it takes allow_tools, allow_args, resend_window, ca, cert, key, server_name; did you mean ca?)`},
		{"siem=https://h:443/?tokn=" + planted, `unknown parameter "tokn" for https`},
		{"siem=https://h:443/?tokn=" + planted, "did you mean token?"},
		{"siem=https://alice:" + planted + "@h/?password=" + planted + "&key_password=" + planted, `unknown parameter "key_password"`},
		{"siem=otlp+http://h:4318?secret_key=" + planted, `unknown parameter "secret_key"`},
		{"siem=https://h/?token=" + planted + "&token=" + planted, "parameter token is given 2 times"},
		{"siem=syslog+tcp://127.0.0.1:514?ca=/etc/ca.pem", "parameter ca: syslog+tcp does not speak TLS"},
		{"siem=hec+http://127.0.0.1:8088?token=" + planted + "&server_name=x", "parameter server_name: hec+http does not speak TLS"},
		{"siem=https://h/?=" + planted, "a query parameter without a name"},
		{"siem=http://h:1?allow_tools=maybe", `allow_tools="maybe"`},
		{"siem=file://" + dir + "?max_bytes=12", `max_bytes="12"`},
		// Userinfo where the scheme takes none.
		{"siem=syslog+tcp://u:" + planted + "@h:514", "syslog+tcp takes no user or password"},
		{"siem=otlp+http://u:" + planted + "@h:4318", "otlp+http takes no user or password"},
		{"siem=hec+https://u:" + planted + "@splunk:8088?token=" + planted, "hec+https takes no user or password"},
		// TLS files.
		{"siem=syslog+tls://127.0.0.1:6514?ca=" + dir + "/missing.pem", "ca=" + dir + "/missing.pem: couldn't read the CA file: no such file or directory"},
		{"siem=https://u:" + planted + "@h/?token=" + planted + "&ca=" + dir, "ca=" + dir + ": couldn't read the CA file: is a directory"},
		{"siem=relp+tls://h:2514?ca=" + notPEM, "the CA file holds no PEM certificate"},
		{"siem=https://h/?token=" + planted + "&ca=/dev/zero", "ca=/dev/zero: couldn't read the CA file: bigger than 8 MiB"},
		{"siem=hec+https://splunk:8088?token=" + planted + "&cert=" + notPEM, "cert and key go together"},
		{"siem=hec+https://splunk:8088?token=" + planted + "&cert=" + notPEM + "&key=" + notPEM, "cert=" + notPEM + ", key=" + notPEM + ": couldn't load the client certificate"},
		// HEC.
		{"siem=hec+https://splunk:8088", "token is required"},
		{"siem=hec+http://10.0.0.7:8088?token=" + planted, "hec+http sends the token in clear and is taken only to a loopback address"},
		{"siem=hec+https://splunk:8088/services/collector?token=" + planted, "hec+https takes no path"},
		{"siem=hec+https://splunk:8088?token=" + planted + "&index=Audit", `index="Audit"`},
		{"siem=hec+https://splunk:8088?token=" + planted + "&ack_timeout=0s", `ack_timeout="0s": want a duration from 1s to 10m`},
		{"siem=hec+https://splunk:8088?token=" + planted + "&sourcetype=a%20b", `sourcetype="a b"`},
	} {
		_, err := exportsink.Configure([]string{tc.value}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "--export ") {
			t.Errorf("--export %q:\n  got  %v\n  want an error starting --export and holding %q", tc.value, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), planted) || strings.Contains(err.Error(), "alice") {
			t.Errorf("--export %q: the error shows a secret: %v", tc.value, err)
		}
	}
}

// A good value's Redacted, String and log lines show the public
// parameters and none of the secrets.
func TestExportRedacted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ value, want string }{
		{"hec+https://splunk.example:8088?token=" + planted + "&index=audit&ack_timeout=5s", "hec+https://splunk.example:8088?token=REDACTED&index=audit&ack_timeout=5s"},
		{"https://alice:" + planted + "@siem.example/in?token=" + planted + "&allow_tools=1", "https://REDACTED@siem.example/in?token=REDACTED&allow_tools=1"},
		{"otlp+https://collector:4318/v1/logs?token=" + url.QueryEscape(planted+"&x") + "&server_name=c", "otlp+https://collector:4318/v1/logs?token=REDACTED&server_name=c"},
	} {
		c, err := exportsink.Parse("siem", tc.value, "")
		if err != nil {
			t.Fatalf("%s: %v", tc.value, err)
		}
		if c.Redacted != tc.want {
			t.Errorf("Redacted = %s, want %s", c.Redacted, tc.want)
		}
		for _, out := range configOutputs(c) {
			if strings.Contains(out, planted) || strings.Contains(out, "alice") {
				t.Errorf("%s shows a secret: %s", tc.value, out)
			}
		}
	}
}

// configOutputs is everything serve may show of a good Config: its
// redacted URL, the Config printed, and the log lines about it.
func configOutputs(c exportsink.Config) []string {
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		log := slog.New(h)
		log.Info("exporting events", "sink", c.Name, "to", c.Redacted, "format", c.Format)
		log.Info("a config logged whole", "config", c)
	}
	return []string{c.Redacted, fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c.Redacted), buf.String()}
}

// FuzzExportValue feeds --export values built around a planted secret
// (the password of the userinfo, and the token, password, key_password
// and secret_key parameters, as the mask says) with the rest random, and
// fails if the secret shows in the error, the redacted URL, the Config
// printed or the log lines.
func FuzzExportValue(f *testing.F) {
	for _, s := range []struct {
		scheme, user, host, port, path, extra string
		mask                                  uint8
	}{
		{"http", "user", "%zz", "", "", "", 1},
		{"https", "user", "siem.example", "443", "/in", "allow_tools=1", 3},
		{"https", "u", "h", "99999", "/p", "cafile=/x", 3},
		{"hec+https", "", "splunk", "8088", "", "index=main", 2},
		{"hec+http", "", "127.0.0.1", "8088", "", "ack_timeout=2s", 2},
		{"syslog+tls", "u", "127.0.0.1", "6514", "", "ca=/missing", 1},
		{"http", "u?x", "h", "1", "", "", 1},
		{"http", "u#x", "h", "1", "", "", 31},
		{"http", "u/x", "h", "1", "/#", "", 7},
		{"otlp+http", "u", "h", "4318", "/v1/logs", "token=dup", 2},
		{"parquet+s3", "AKIA", "minio", "9000", "/bucket", "region=eu", 1},
		{"file", "", "", "", "/tmp/x", "max_bytes=1", 8},
		{"relp", "", "h", "0", "", "window=9", 16},
		{"HTTP", "a@b", "h", "1", "", "", 1},
	} {
		f.Add(s.scheme, s.user, s.host, s.port, s.path, s.extra, s.mask)
	}
	f.Fuzz(func(t *testing.T, scheme, user, host, port, path, extra string, mask uint8) {
		const secret = "Zq7SeCrEt0xK"
		for _, part := range []string{scheme, user, host, port, path, extra} {
			if mayHold(part, secret) {
				return
			}
		}
		if strings.Contains(extra, "/dev") || strings.Contains(extra, "/proc") || strings.Contains(extra, "/sys") {
			return // TLS files are read: not these
		}
		if ls := strings.ToLower(scheme); strings.Contains(ls, "file") || strings.Contains(ls, "parquet") {
			// A directory sink that parses is created: secret_key, which
			// no sink takes, stops it first.
			mask |= 16
		}
		v := scheme + "://" + user
		if mask&1 != 0 {
			v += ":" + secret
		}
		if user != "" || mask&1 != 0 {
			v += "@"
		}
		v += host
		if port != "" {
			v += ":" + port
		}
		v += path + "?" + extra
		for i, p := range []string{"token", "password", "key_password", "secret_key"} {
			if mask&(2<<i) != 0 {
				v += "&" + p + "=" + secret
			}
		}
		var outs []string
		for _, flag := range []string{"siem=" + v, v} {
			if _, err := exportsink.Configure([]string{flag}, nil); err != nil {
				outs = append(outs, err.Error())
			}
		}
		if c, err := exportsink.Parse("siem", v, ""); err != nil {
			outs = append(outs, err.Error())
		} else {
			outs = append(outs, configOutputs(c)...)
		}
		for _, out := range outs {
			if strings.Contains(out, secret) {
				t.Fatalf("--export %q shows the secret: %s", v, out)
			}
		}
	})
}

// mayHold says whether a random part could spell the secret by itself,
// as it stands or once %-decoded, in any case.
func mayHold(part, secret string) bool {
	forms := []string{part}
	if u, err := url.PathUnescape(part); err == nil {
		forms = append(forms, u)
	}
	if u, err := url.QueryUnescape(part); err == nil {
		forms = append(forms, u)
	}
	for _, f := range forms {
		if strings.Contains(strings.ToLower(f), strings.ToLower(secret)) {
			return true
		}
	}
	return false
}
