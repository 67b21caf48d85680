// Package exportsink holds the push sinks of export (docs/export.md): the
// receivers compliance teams already run, fed through ledger/export's
// durable cursors. Each sink takes one batch at a time and returns only
// once the receiver has it:
//
//   - syslog+tcp://HOST:PORT, syslog+tls://HOST:PORT: RFC 5424 messages,
//     the event JSON as MSG, framed by octet counting (RFC 6587 §3.4.1);
//   - relp://HOST:PORT, relp+tls://HOST:PORT: the same messages over RELP,
//     each acknowledged by the receiver (relp.go);
//   - http://..., https://...: NDJSON batches by POST;
//   - otlp+http://HOST:PORT[/PATH]: OTLP/HTTP logs through OpenTelemetry's
//     own log exporter (otlploghttp), the event JSON as the body;
//   - file:///DIR: size-rotated NDJSON files for Fluent Bit or Vector.
//
// [RFC 5424]: https://www.rfc-editor.org/rfc/rfc5424
// [RFC 6587]: https://www.rfc-editor.org/rfc/rfc6587
package exportsink

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/ledger/export"
)

// Config is one parsed --export sink.
type Config struct {
	Name   string
	Kind   string // syslog+tcp, syslog+tls, relp, relp+tls, http, https, otlp+http, otlp+https, file
	Format trace.Format
	// Redacted is the URL without userinfo and with secrets in the query
	// masked: what logs, errors and /api/v1/exports may show.
	Redacted string
	url      *url.URL
	// Options say what of the params may leave (allow_tools,
	// allow_args query parameters).
	Options trace.Options
	tls     *tls.Config
	// file sink
	dir      string
	maxBytes int64
	// relp sink: the most frames awaiting their rsp
	window int
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ParseFlag splits a --export value NAME=URL.
func ParseFlag(v string) (name, rawURL string, err error) {
	name, rawURL, ok := strings.Cut(v, "=")
	if !ok || !nameRE.MatchString(name) || rawURL == "" {
		return "", "", fmt.Errorf("--export %q: want NAME=URL, NAME of letters, digits, '.', '_' or '-' (at most 64)", redactFlag(v))
	}
	return name, rawURL, nil
}

// redactFlag hides the userinfo of a NAME=URL value for an error message.
func redactFlag(v string) string {
	name, raw, ok := strings.Cut(v, "=")
	if !ok {
		if u, err := url.Parse(v); err == nil && u.User != nil {
			return Redact(u)
		}
		return v
	}
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			return name + "=" + "REDACTED@" + raw[i+1:]
		}
		return v
	}
	return name + "=" + Redact(u)
}

// secretParams are query parameters whose values never appear in logs.
var secretParams = map[string]bool{"token": true, "password": true, "key_password": true}

// Redact is u without its password and with secret query values masked.
func Redact(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User("REDACTED")
	}
	if c.RawQuery != "" {
		q := c.Query()
		for k := range q {
			if secretParams[k] {
				q.Set(k, "REDACTED")
			}
		}
		c.RawQuery = q.Encode()
	}
	return c.String()
}

// Parse checks one sink: its URL, its format ("" is ocsf) and the files
// its TLS options name, which are read now, so that a bad sink stops serve
// at start. Errors name the flag and never hold a password.
func Parse(name, rawURL, format string) (Config, error) {
	c := Config{Name: name}
	flag := "--export " + name
	if !nameRE.MatchString(name) {
		return c, fmt.Errorf("--export %q: the name must be letters, digits, '.', '_' or '-' (at most 64)", name)
	}
	f, err := trace.ParseFormat(format)
	if err != nil {
		return c, fmt.Errorf("--export-format %s: %w", name, err)
	}
	c.Format = f
	u, err := url.Parse(rawURL)
	if err != nil {
		return c, fmt.Errorf("%s: not a URL: %s", flag, redactFlag(rawURL))
	}
	c.url = u
	c.Redacted = Redact(u)
	c.Kind = u.Scheme
	q := u.Query()
	if err := c.parseAllow(q); err != nil {
		return c, fmt.Errorf("%s (%s): %w", flag, c.Redacted, err)
	}
	switch c.Kind {
	case "syslog+tcp", "syslog+tls", "relp", "relp+tls", "otlp+http", "otlp+https", "http", "https":
		if u.Host == "" || u.Opaque != "" {
			return c, fmt.Errorf("%s (%s): want %s://HOST:PORT", flag, c.Redacted, c.Kind)
		}
		if strings.HasPrefix(c.Kind, "syslog") || strings.HasPrefix(c.Kind, "relp") || strings.HasPrefix(c.Kind, "otlp") {
			if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
				return c, fmt.Errorf("%s (%s): want %s://HOST:PORT with a port", flag, c.Redacted, c.Kind)
			}
		}
		if (strings.HasPrefix(c.Kind, "syslog") || strings.HasPrefix(c.Kind, "relp")) && u.User != nil {
			return c, fmt.Errorf("%s (%s): syslog takes no user or password", flag, c.Redacted)
		}
		if strings.HasPrefix(c.Kind, "relp") {
			if err := c.parseRELP(q); err != nil {
				return c, fmt.Errorf("%s (%s): %w", flag, c.Redacted, err)
			}
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" || u.Path == "" || u.User != nil {
			return c, fmt.Errorf("%s (%s): want file:///ABSOLUTE/DIR", flag, c.Redacted)
		}
		c.dir = filepath.Clean(u.Path)
		c.maxBytes = 64 << 20
		if v := q.Get("max_bytes"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 4096 {
				return c, fmt.Errorf("%s (%s): max_bytes %q: want a number of bytes, at least 4096", flag, c.Redacted, v)
			}
			c.maxBytes = n
		}
		if err := os.MkdirAll(c.dir, 0o750); err != nil {
			return c, fmt.Errorf("%s: couldn't create the directory: %w", flag, err)
		}
		return c, nil
	case "":
		return c, fmt.Errorf("%s: %q has no scheme (want syslog+tcp, syslog+tls, relp, relp+tls, http, https, otlp+http or file)", flag, c.Redacted)
	default:
		return c, fmt.Errorf("%s: unknown scheme %q (want syslog+tcp, syslog+tls, relp, relp+tls, http, https, otlp+http or file)", flag, c.Kind)
	}
	if c.Kind == "syslog+tls" || c.Kind == "relp+tls" || c.Kind == "https" || c.Kind == "otlp+https" {
		tc, err := tlsConfig(u, q)
		if err != nil {
			return c, fmt.Errorf("%s (%s): %w", flag, c.Redacted, err)
		}
		c.tls = tc
	} else if q.Get("ca") != "" || q.Get("cert") != "" {
		return c, fmt.Errorf("%s (%s): ca and cert need a TLS scheme", flag, c.Redacted)
	}
	return c, nil
}

func (c *Config) parseAllow(q url.Values) error {
	switch v := q.Get("allow_tools"); v {
	case "", "0", "false":
	case "1", "true":
		c.Options.AllowTools = true
	default:
		return fmt.Errorf("allow_tools=%q: want true or false", v)
	}
	if v := q.Get("allow_args"); v != "" {
		for _, k := range strings.Split(v, ",") {
			if k == "" {
				return fmt.Errorf("allow_args=%q: an empty key", v)
			}
			c.Options.AllowArgKeys = append(c.Options.AllowArgKeys, k)
		}
	}
	return nil
}

// tlsConfig reads the TLS files the URL's query names: ca (PEM roots that
// replace the system's), cert and key (a client certificate), and takes
// server_name.
func tlsConfig(u *url.URL, q url.Values) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
	if v := q.Get("server_name"); v != "" {
		tc.ServerName = v
	}
	if ca := q.Get("ca"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("couldn't read the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", ca)
		}
		tc.RootCAs = pool
	}
	cert, key := q.Get("cert"), q.Get("key")
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("cert and key go together")
	}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("couldn't load the client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	return tc, nil
}

// Open returns the sink c configures. It does not connect: a receiver
// that is down makes the first Send fail, and delivery retries.
func Open(c Config) (export.Sink, error) {
	switch c.Kind {
	case "syslog+tcp", "syslog+tls":
		return newSyslog(c), nil
	case "relp", "relp+tls":
		return newRELP(c), nil
	case "http", "https":
		return newHTTP(c), nil
	case "otlp+http", "otlp+https":
		return newOTLP(c)
	case "file":
		return newFile(c)
	}
	return nil, fmt.Errorf("export sink %s: unknown kind %q", c.Name, c.Kind)
}
