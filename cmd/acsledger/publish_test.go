package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acsledger/acsledger/internal/s3test"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// The built binary refuses a bad --publish value before serve starts
// anything: exit 2, the message names what is wrong, and shows no secret.
func TestServePublishValueExit2(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-Pb7"
	for _, tc := range []struct {
		value string
		env   []string
		want  string
	}{
		{"s3://log/pub?endpoint=http://127.0.0.1:9", nil, "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		{"s3://key:" + secret + "@log/pub", nil, "must not carry credentials"},
		{"s3://log/pub?endpont=http://127.0.0.1:9", nil, `unknown parameter "endpont"`},
		{"s3://log/pub?endpoint=127.0.0.1:9", []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=" + secret}, "endpoint must be http(s)://HOST[:PORT]"},
		{"s3:///pub", nil, "the bucket name is missing"},
		{"gs://log/pub", nil, "scheme must be s3 or file"},
		{"s3://log/pub?credentials=/nonexistent/creds", nil, "credentials file"},
	} {
		cmd := exec.Command(binary, "serve", "--db", t.TempDir(), "--addr", "127.0.0.1:0", "--publish", tc.value)
		cmd.Dir = t.TempDir()
		cmd.Env = append(withoutAWS(os.Environ()), tc.env...)
		out, err := cmd.CombinedOutput()
		msg := string(out)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(msg, "--publish") || !strings.Contains(msg, tc.want) {
			t.Errorf("serve --publish %q: %v, output:\n%s\nwant exit 2 and %q", tc.value, err, msg, tc.want)
		}
		if strings.Contains(msg, secret) {
			t.Errorf("serve --publish %q printed the secret:\n%s", tc.value, msg)
		}
	}
}

func withoutAWS(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "AWS_") {
			out = append(out, e)
		}
	}
	return out
}

// TestServePublishS3 runs serve publishing to SeaweedFS, appends entries,
// waits for the bucket's checkpoint to reach them and stops serve; then
// checks the log from the bucket alone with x/mod's tlog code (signature,
// every leaf's inclusion). A second serve on another store (another log
// key) is refused the bucket and changes nothing in it.
func TestServePublishS3(t *testing.T) {
	t.Parallel()
	w := s3test.Start(t, "log", s3test.Options{PublicRead: true})
	env := append(withoutAWS(os.Environ()), "AWS_ACCESS_KEY_ID="+w.Access, "AWS_SECRET_ACCESS_KEY="+w.Secret)
	keys := filepath.Join(t.TempDir(), "keys")
	keygen(t, keys, "--log-origin", tlogtest.Origin)
	plain, err := exec.Command(binary, "log-key", "--keys", keys).Output()
	if err != nil {
		t.Fatalf("log-key: %v", err)
	}
	vkey := strings.Split(strings.TrimSpace(string(plain)), "\n")[1]
	publish := "s3://log/acs?endpoint=http://" + w.Endpoint
	s := startIn(t, t.TempDir(), env, "serve", "--addr", "127.0.0.1:0", "--db", t.TempDir(), "--keys", keys, "--publish", publish)
	const n = 40
	for i := range n {
		if code, out := post(t, s.url+"/api/v1/sessions/s1/entries?agent_id=agent-7", entryJSON(i)); code != http.StatusCreated {
			t.Fatalf("append %d: %d %v", i, code, out)
		}
	}
	base := "http://" + w.Endpoint + "/log/acs"
	var cp []byte
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, b := plainGet(t, base+"/checkpoint")
		if resp.StatusCode == http.StatusOK {
			if size, _ := tlogtest.OpenCheckpoint(t, vkey, b); size == n {
				cp = b
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket's checkpoint never reached %d leaves (last: %s %q)\nserve log:\n%s", n, resp.Status, b, s.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, served := get(t, s.url+"/checkpoint"); code != http.StatusOK || string(served) != string(cp) {
		t.Errorf("serve's /checkpoint differs from the bucket's:\n%s\n%s", served, cp)
	}
	code, metrics := get(t, s.url+"/metrics")
	if code != http.StatusOK || !regexp.MustCompile(fmt.Sprintf(`(?m)^acsledger_tlogpub_published_tree_size(\{[^}]*\})? %d$`, n)).Match(metrics) {
		t.Errorf("/metrics lacks the bucket's tree size %d:\n%s", n, grepLines(string(metrics), "tlogpub"))
	}
	s.stop(t, syscall.SIGTERM)

	size, root := tlogtest.OpenCheckpoint(t, vkey, cp)
	tree := sumtlog.Tree{N: size, Hash: root}
	thr := sumtlog.TileHashReader(tree, publicTiles{t, base})
	_, bundle := plainGet(t, base+"/"+tlog.TilePath(tlog.EntriesLevel, 0, n))
	leaves, err := tlog.ParseBundle(bundle)
	if err != nil || len(leaves) != n {
		t.Fatalf("entry bundle: %d leaves, %v", len(leaves), err)
	}
	for i, leaf := range leaves {
		p, err := sumtlog.ProveRecord(size, int64(i), thr)
		if err != nil {
			t.Fatalf("inclusion proof of %d from the bucket: %v", i, err)
		}
		if err := sumtlog.CheckRecord(p, size, root, int64(i), sumtlog.RecordHash(leaf)); err != nil {
			t.Fatalf("leaf %d: %v", i, err)
		}
	}

	// Another store has another log key: serve refuses the bucket.
	otherKeys := filepath.Join(t.TempDir(), "keys")
	keygen(t, otherKeys, "--log-origin", "other.test/log")
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--db", t.TempDir(), "--keys", otherKeys, "--publish", publish)
	cmd.Dir, cmd.Env = t.TempDir(), env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a checkpoint signed by this log's key") || !strings.Contains(string(out), "s3://log/acs/") {
		t.Fatalf("serve on another log's bucket: %v\n%s", err, out)
	}
	if strings.Contains(string(out), w.Secret) {
		t.Fatal("serve printed the secret key")
	}
	if _, b := plainGet(t, base+"/checkpoint"); string(b) != string(cp) {
		t.Fatalf("the refused serve changed the checkpoint:\n%s", b)
	}
}

func plainGet(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// publicTiles is a sumdb/tlog TileReader over a bucket's public URL.
type publicTiles struct {
	t    *testing.T
	base string
}

func (h publicTiles) Height() int                        { return 8 }
func (h publicTiles) SaveTiles([]sumtlog.Tile, [][]byte) {}
func (h publicTiles) ReadTiles(tiles []sumtlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, tile := range tiles {
		path := "tile/" + strings.TrimPrefix(tile.Path(), "tile/8/")
		resp, b := plainGet(h.t, h.base+"/"+path)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		out[i] = b
	}
	return out, nil
}
