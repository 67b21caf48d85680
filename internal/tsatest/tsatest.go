// Package tsatest runs a real RFC 3161 time-stamping authority for tests:
// Debian's `openssl ts -reply` behind a small loopback HTTP wrapper, with
// a throwaway CA and TSA certificate made in the test. The authority can
// be taken down (connections are dropped) and brought back.
package tsatest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TSA is a running authority.
type TSA struct {
	// URL is where time-stamp queries are POSTed.
	URL string
	// CACert is the PEM of the throwaway CA that issued the TSA's
	// certificate: what --tsa-cert takes.
	CACert []byte
	// CACertFile holds CACert.
	CACertFile string

	dir     string
	down    atomic.Bool
	mu      sync.Mutex // openssl ts keeps its serial in a file
	stamped atomic.Int64
}

// Start makes a CA and a TSA certificate under t.TempDir() and serves
// `openssl ts -reply` on a loopback port until the test ends. It fails t
// if openssl is missing (CI installs it: .ci/run).
func Start(t testing.TB) *TSA {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatalf("openssl is needed for the RFC 3161 authority: %v", err)
	}
	dir := t.TempDir()
	a := &TSA{dir: dir, CACertFile: filepath.Join(dir, "ca.pem")}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "acsledger test TSA root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	tsaKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	// RFC 3161 §2.3: the TSA's certificate has exactly one extended key
	// usage, id-kp-timeStamping, and it is critical (openssl insists).
	eku, _ := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 8}})
	tsaTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "acsledger test TSA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:        x509.KeyUsageDigitalSignature,
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Critical: true, Value: eku}},
	}
	tsaDER, err := x509.CreateCertificate(rand.Reader, tsaTmpl, ca, &tsaKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(tsaKey)
	a.CACert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", a.CACert)
	write("tsa.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsaDER}))
	write("tsa.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	write("serial", []byte("01\n"))
	write("tsa.cnf", fmt.Appendf(nil, `[ tsa ]
default_tsa = tsa1
[ tsa1 ]
dir = %s
serial = $dir/serial
crypto_device = builtin
signer_cert = $dir/tsa.pem
certs = $dir/ca.pem
signer_key = $dir/tsa.key
signer_digest = sha256
default_policy = 1.3.6.1.4.1.99999.1
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = yes
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = sha256
`, dir))
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(srv.Close)
	a.URL = srv.URL + "/tsa"
	return a
}

// SetDown takes the authority down (every connection is dropped without
// an answer) or brings it back.
func (a *TSA) SetDown(down bool) { a.down.Store(down) }

// Stamped returns how many responses the authority has sent.
func (a *TSA) Stamped() int64 { return a.stamped.Load() }

func (a *TSA) serve(w http.ResponseWriter, r *http.Request) {
	if a.down.Load() {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/timestamp-query" {
		http.Error(w, "want POST application/timestamp-query", http.StatusBadRequest)
		return
	}
	q, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	qf, rf := filepath.Join(a.dir, "q.tsq"), filepath.Join(a.dir, "r.tsr")
	if err := os.WriteFile(qf, q, 0o600); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out, err := exec.Command("openssl", "ts", "-reply", "-config", filepath.Join(a.dir, "tsa.cnf"), "-queryfile", qf, "-out", rf).CombinedOutput()
	if err != nil {
		http.Error(w, fmt.Sprintf("openssl ts: %v: %s", err, out), http.StatusInternalServerError)
		return
	}
	resp, err := os.ReadFile(rf)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	a.stamped.Add(1)
	w.Header().Set("Content-Type", "application/timestamp-reply")
	w.Write(resp)
}
