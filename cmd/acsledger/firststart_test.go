package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// envWithout is the test's environment without the bootstrap token.
func envWithout() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ACSLEDGER_ADMIN_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

// TestFirstStart runs the README's quick start: `acsledger serve` with no
// flags in an empty directory, then `acsledger demo` beside it. The first
// start saves an admin token with mode 0600 and names the file, but never
// writes the token to its log; the demo finds it; a restart keeps it; and
// a token file or key file others can read stops the start.
func TestFirstStart(t *testing.T) {
	dir := t.TempDir()
	env := envWithout()
	s := startIn(t, dir, env, "serve", "--addr", "127.0.0.1:0")
	file := filepath.Join(dir, "acsledger-data", "admin-token")
	if !strings.Contains(s.log(), "admin_token="+file) {
		t.Errorf("the serving line does not say where the admin token is:\n%s", s.log())
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", file, st.Mode().Perm())
	}
	b, _ := os.ReadFile(file)
	token := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^acsl_[A-Za-z0-9_-]{43}$`).MatchString(token) {
		t.Fatalf("admin-token holds %q", b)
	}
	req, _ := http.NewRequest("GET", s.url+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var who bytes.Buffer
	who.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(who.String(), `"name":"admin","role":"admin"`) {
		t.Errorf("whoami with the first token: %d %s", resp.StatusCode, who.String())
	}

	// The README's second command: the demo reads the keys and the token
	// from ./acsledger-data.
	demo := exec.Command(binary, "demo", "--url", s.url)
	demo.Dir, demo.Env = dir, env
	out, err := demo.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "entries verified") {
		t.Fatalf("demo beside a fresh serve: %v\n%s\nserver:\n%s", err, out, s.log())
	}
	if strings.Contains(string(out), token) {
		t.Error("the demo printed the token")
	}
	s.stop(t, os.Interrupt)
	if strings.Contains(s.log(), token) {
		t.Errorf("the server logged the token:\n%s", s.log())
	}

	// Restarted, it keeps the token it made.
	s = startIn(t, dir, env, "serve", "--addr", "127.0.0.1:0")
	s.stop(t, os.Interrupt)
	if again, _ := os.ReadFile(file); !bytes.Equal(again, b) {
		t.Error("a second start replaced the admin token")
	}
	if list := tokenCLI(t, filepath.Join(dir, "acsledger-data"), "list"); strings.Count(list, "\n") != 2 || !strings.Contains(list, "admin ") {
		t.Errorf("token list after two starts:\n%s", list)
	}

	// Secrets others can read stop the start, with the fix in the message.
	for _, f := range []string{file, filepath.Join(dir, "acsledger-data", "keys", "acsledger-hmac.key.json")} {
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0")
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "readable by group or others") || !strings.Contains(string(out), "chmod 600 "+strings.TrimPrefix(f, dir+"/")) {
			t.Errorf("serve with %s mode 0644: %v\n%s", f, err, out)
		}
		os.Chmod(f, 0o600)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key (mode 0600)
// into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "acsledger test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLS: --tls-cert/--tls-key serve HTTPS, and the UI's session
// cookie is then Secure; a TLS key others can read stops the start.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	s := startServer(t, "--db", filepath.Join(dir, "data"), "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("serving at %s, want https", s.url)
	}
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Get(s.url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz over TLS: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = client.PostForm(s.url+"/ui/login", url.Values{"token": {testAdminToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if sc := resp.Header.Get("Set-Cookie"); resp.StatusCode != 303 || !strings.Contains(sc, "; Secure") || !strings.Contains(sc, "HttpOnly") {
		t.Errorf("login over TLS: %d Set-Cookie %q, want a Secure, HttpOnly cookie", resp.StatusCode, sc)
	}
	if _, err := http.Get(strings.Replace(s.url, "https://", "http://", 1) + "/healthz"); err == nil {
		// Plain HTTP to a TLS port gets a 400 from net/http, not an answer.
		t.Log("plain HTTP to the TLS port was answered (with net/http's 400)")
	}
	s.stop(t, os.Interrupt)

	os.Chmod(keyFile, 0o640)
	out, err := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "data"), "--tls-cert", certFile, "--tls-key", keyFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "chmod 600 "+keyFile) {
		t.Errorf("serve with a group-readable TLS key: %v\n%s", err, out)
	}
	out, err = exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--tls-cert", certFile).CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "--tls-cert and --tls-key go together") {
		t.Errorf("--tls-cert alone: exit %d\n%s", code, out)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestTokenCLIErrors: usage errors exit 2, an unknown name exits 1.
func TestTokenCLIErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"token"}, 2, "create, list or revoke"},
		{[]string{"token", "create", "--db", dir, "--role", "root"}, 2, "--role \"root\""},
		{[]string{"token", "create", "--db", dir, "--role", "viewer", "--expires", "soon"}, 2, "--expires"},
		{[]string{"token", "revoke", "--db", dir, "nobody"}, 1, "not found"},
		{[]string{"token", "revoke", "--db", dir}, 2, "one token NAME"},
		{[]string{"token", "revoke", "nobody", "--db", dir}, 1, "not found"},
		{[]string{"token", "revoke", "a", "b", "--db", dir}, 2, "one token NAME"},
	} {
		cmd := exec.Command(binary, tc.args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := exitCode(cmd.Run())
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d saying %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.want)
		}
	}
	// An expiry in days, shown by list.
	newToken(t, dir, "--role", "viewer", "--name", "month", "--expires", "30d")
	if list := tokenCLI(t, dir, "list", "--json"); !strings.Contains(list, `"name": "month"`) || !strings.Contains(list, `"state": "active"`) || !strings.Contains(list, `"expires_at": "`) {
		t.Errorf("token list --json:\n%s", list)
	}
}
