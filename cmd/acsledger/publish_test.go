package main

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/minio/minio-go/v7"
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
	base := "http://" + w.Endpoint + "/log/acs"
	appendUntil := func(from, to int) []byte {
		for i := from; i < to; i++ {
			if code, out := post(t, s.url+"/api/v1/sessions/s1/entries?agent_id=agent-7", entryJSON(i)); code != http.StatusCreated {
				t.Fatalf("append %d: %d %v", i, code, out)
			}
		}
		// Reading evidence is itself recorded: the receipt's read adds
		// a leaf, so the tree may hold more than the appended entries.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			resp, b := plainGet(t, base+"/checkpoint")
			if resp.StatusCode == http.StatusOK {
				if size, _ := tlogtest.OpenCheckpoint(t, vkey, b); size >= int64(to) {
					return b
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the bucket's checkpoint never reached %d leaves (last: %s %q)\nserve log:\n%s", to, resp.Status, b, s.log())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	appendUntil(0, n/2)
	// A receipt of entry 3 against the tree of 20, checked below from the
	// bucket against the tree of 40.
	code, receipt := get(t, s.url+"/api/v1/sessions/s1/entries/3/receipt")
	if code != http.StatusOK {
		t.Fatalf("receipt: %d %s", code, receipt)
	}
	receiptFile := filepath.Join(t.TempDir(), "e3.tlog-proof")
	if err := os.WriteFile(receiptFile, receipt, 0o600); err != nil {
		t.Fatal(err)
	}
	appendUntil(n/2, n)
	// The bucket catches up with what serve publishes, and /metrics
	// shows the bucket's tree size.
	var size int64
	var root sumtlog.Hash
	var cp []byte
	for deadline := time.Now().Add(2 * time.Minute); ; {
		_, served := get(t, s.url+"/checkpoint")
		_, cp = plainGet(t, base+"/checkpoint")
		size, root = tlogtest.OpenCheckpoint(t, vkey, cp)
		_, metrics := get(t, s.url+"/metrics")
		gauge := regexp.MustCompile(fmt.Sprintf(`(?m)^acsledger_tlogpub_published_tree_size(\{[^}]*\})? %d$`, size))
		if string(served) == string(cp) && gauge.Match(metrics) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket's checkpoint never matched serve's, or /metrics lacks its size %d:\n%s\n%s\n%s", size, served, cp, grepLines(string(metrics), "tlogpub"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop(t, syscall.SIGTERM)

	if size < n || size > 255 {
		t.Fatalf("published tree of %d leaves", size)
	}
	tree := sumtlog.Tree{N: size, Hash: root}
	thr := sumtlog.TileHashReader(tree, publicTiles{t, base})
	_, bundle := plainGet(t, base+"/"+tlog.TilePath(tlog.EntriesLevel, 0, int(size)))
	leaves, err := tlog.ParseBundle(bundle)
	if err != nil || int64(len(leaves)) != size {
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

	// The auditor's copy of the bucket, as `aws s3 sync` makes it:
	// acsverify reads files, it opens no connection.
	out, exit := runAcsverify(t, "receipt", "--json", "--log-key", vkey, "--log-dir", mirror(t, w, "log", "acs/"), receiptFile)
	// The entries were appended through the API, with no Guardian
	// response: that is the one finding; the log's proofs all hold.
	var rep struct {
		TreeSize      int64 `json:"tree_size"`
		NewerTreeSize int64 `json:"newer_tree_size"`
		Findings      []struct {
			Code string `json:"code"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("acsverify receipt --log-dir: exit %d, %v\n%s", exit, err, out)
	}
	if exit != 1 || rep.NewerTreeSize != size || rep.TreeSize >= size || len(rep.Findings) != 1 || rep.Findings[0].Code != "entry_without_response" {
		t.Fatalf("acsverify receipt --log-dir: exit %d\n%s", exit, out)
	}

	if out, exit := runAcsverify(t, "receipt", "--log-key", vkey, "--log-dir", filepath.Join(t.TempDir(), "none"), receiptFile); exit != 2 || !strings.Contains(out, "--log-dir: ") {
		t.Errorf("acsverify --log-dir of a missing directory: exit %d\n%s", exit, out)
	}
	// A tile overwritten in the bucket (bypassing the publisher) is
	// caught: the tiles no longer hash to the signed root.
	tile := "acs/" + tlog.TilePath(0, 0, int(size))
	junk := make([]byte, 32*size)
	if _, err := w.Client.PutObject(context.Background(), "log", tile, bytes.NewReader(junk), int64(len(junk)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, exit := runAcsverify(t, "receipt", "--log-key", vkey, "--log-dir", mirror(t, w, "log", "acs/"), receiptFile); exit == 0 || !strings.Contains(out, "from the published tiles") {
		t.Errorf("acsverify --log-dir over an overwritten tile: exit %d\n%s", exit, out)
	}

	// Another store has another log key: serve refuses the bucket.
	otherKeys := filepath.Join(t.TempDir(), "keys")
	keygen(t, otherKeys, "--log-origin", "other.test/log")
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--db", t.TempDir(), "--keys", otherKeys, "--publish", publish)
	cmd.Dir, cmd.Env = t.TempDir(), env
	cmdOut, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(cmdOut), "not a checkpoint signed by this log's key") || !strings.Contains(string(cmdOut), "s3://log/acs/") {
		t.Fatalf("serve on another log's bucket: %v\n%s", err, cmdOut)
	}
	if strings.Contains(string(cmdOut), w.Secret) {
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

// mirror copies every object of bucket under prefix into a new directory,
// by key less the prefix, as an auditor's `aws s3 sync` would.
func mirror(t *testing.T, w *s3test.Server, bucket, prefix string) string {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	for o := range w.Client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		name := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(o.Key, prefix)))
		if err := os.MkdirAll(filepath.Dir(name), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := w.Client.FGetObject(ctx, bucket, o.Key, name, minio.GetObjectOptions{}); err != nil {
			t.Fatalf("%s: %v", o.Key, err)
		}
	}
	return dir
}
