package exportsink_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"
)

// The receivers the sinks are tested against: a real rsyslog, started
// with its own configuration; the test's own HTTP server; an OTLP/HTTP
// logs receiver that decodes the protobuf (building a real OpenTelemetry
// Collector from its Go modules is far past CI's time budget here).

// freePort returns a loopback port nobody listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// tlsFiles are a throwaway CA and a certificate for 127.0.0.1 signed by
// it, as PEM files; the certificate serves as a client's too (imrelp
// over TLS asks for one).
type tlsFiles struct{ CA, Cert, Key string }

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "acsledger test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := tlsFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	for path, block := range map[string]*pem.Block{
		f.CA: {Type: "CERTIFICATE", Bytes: caDER}, f.Cert: {Type: "CERTIFICATE", Bytes: der}, f.Key: {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// rsyslog is a real rsyslogd receiving on a loopback port and writing
// each message as "MSGID|STRUCTURED-DATA|MSG" lines to a file.
type rsyslog struct {
	t    testing.TB
	dir  string
	port int
	out  string
	conf string
	bin  string
	cmd  *exec.Cmd
}

func startRsyslog(t *testing.T, tf *tlsFiles) *rsyslog {
	t.Helper()
	bin, err := exec.LookPath("rsyslogd")
	if err != nil {
		bin = "/usr/sbin/rsyslogd"
		if _, err := os.Stat(bin); err != nil {
			t.Fatal("rsyslogd not installed (Debian: apt-get install rsyslog rsyslog-gnutls; .ci/run does)")
		}
	}
	r := &rsyslog{t: t, dir: t.TempDir(), port: freePort(t), bin: bin}
	r.out = filepath.Join(r.dir, "received.log")
	global := fmt.Sprintf(`workDirectory=%q maxMessageSize="1m"`, r.dir)
	mod := `module(load="imtcp")`
	if tf != nil {
		global += fmt.Sprintf(` defaultNetstreamDriverCAFile=%q defaultNetstreamDriverCertFile=%q defaultNetstreamDriverKeyFile=%q`, tf.CA, tf.Cert, tf.Key)
		mod = `module(load="imtcp" streamDriver.name="gtls" streamDriver.mode="1" streamDriver.authMode="anon")`
	}
	conf := fmt.Sprintf(`global(%s)
%s
input(type="imtcp" address="127.0.0.1" port="%d")
template(name="fields" type="list") {
  property(name="msgid") constant(value="|")
  property(name="structured-data") constant(value="|")
  property(name="msg") constant(value="\n")
}
action(type="omfile" file=%q template="fields" asyncWriting="off" flushOnTXEnd="on")
`, global, mod, r.port, r.out)
	r.conf = filepath.Join(r.dir, "rsyslog.conf")
	if err := os.WriteFile(r.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r.start(bin)
	t.Cleanup(r.stop)
	return r
}

func (r *rsyslog) start(bin string) {
	r.t.Helper()
	cmd := exec.Command(bin, "-n", "-f", r.conf, "-i", filepath.Join(r.dir, "rsyslogd.pid"))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.cmd = cmd
	// Generous: on a loaded 2-core box with several rsyslogds starting
	// their TLS at once, 10 s was too short.
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.port))
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			r.stop()
			r.t.Fatalf("rsyslogd did not listen on %d: %s", r.port, stderr.Bytes())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends rsyslogd (it flushes what it received to the file first).
func (r *rsyslog) stop() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-done
	}
	r.cmd = nil
}

func (r *rsyslog) restart() {
	r.t.Helper()
	r.start(r.bin)
}

var sdHash = regexp.MustCompile(`entry_hash="([0-9a-f]{64})"`)

// received returns the lines rsyslog wrote so far.
func (r *rsyslog) received() []string {
	b, err := os.ReadFile(r.out)
	if err != nil && !os.IsNotExist(err) {
		r.t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// httpReceiver is the test's own NDJSON collector: it records each POST's
// lines, answers 503 while down, and checks Basic credentials.
type httpReceiver struct {
	mu       sync.Mutex
	down     bool
	user, pw string
	lines    []string
	keys     []string
	srv      *httptest.Server
}

func newHTTPReceiver(t *testing.T, user, pw string) *httpReceiver {
	h := &httpReceiver{user: user, pw: pw}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != h.user || p != h.pw {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Content-Type") != "application/x-ndjson" {
			http.Error(w, "want NDJSON", http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.down {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		h.lines = append(h.lines, strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")...)
		h.keys = append(h.keys, r.Header.Get("Idempotency-Key"))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *httpReceiver) setDown(down bool) {
	h.mu.Lock()
	h.down = down
	h.mu.Unlock()
}

func (h *httpReceiver) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lines...)
}

// otlpReceiver decodes OTLP/HTTP logs requests (protobuf, gzip or not).
type otlpReceiver struct {
	mu     sync.Mutex
	bodies []string
	attrs  []map[string]string
	srv    *httptest.Server
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	o := &otlpReceiver{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not OTLP logs", http.StatusNotFound)
			return
		}
		var rd io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rd = zr
		}
		body, err := io.ReadAll(rd)
		var msg collogspb.ExportLogsServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.mu.Lock()
		for _, rl := range msg.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					o.bodies = append(o.bodies, lr.Body.GetStringValue())
					a := map[string]string{"event_name": lr.EventName}
					for _, kv := range lr.Attributes {
						a[kv.Key] = kv.Value.GetStringValue()
					}
					o.attrs = append(o.attrs, a)
				}
			}
		}
		o.mu.Unlock()
		out, _ := proto.Marshal(&collogspb.ExportLogsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *otlpReceiver) received() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.bodies...)
}
