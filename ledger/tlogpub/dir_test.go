package tlogpub_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/acsledger/acsledger/ledger/tlogpub"
)

// TestNeededTiles lists what each publication writes, by C2SP path.
func TestNeededTiles(t *testing.T) {
	for _, tc := range []struct {
		old, new uint64
		want     string
	}{
		{0, 1, "tile/0/000.p/1 tile/entries/000.p/1"},
		{0, 256, "tile/0/000 tile/entries/000 tile/1/000.p/1"},
		{0, 300, "tile/0/000 tile/entries/000 tile/0/001.p/44 tile/entries/001.p/44 tile/1/000.p/1"},
		{300, 1000, "tile/0/001 tile/entries/001 tile/0/002 tile/entries/002 tile/0/003.p/232 tile/entries/003.p/232 tile/1/000.p/3"},
		{300, 310, "tile/0/001.p/54 tile/entries/001.p/54"}, // level 1 did not grow
		{65535, 65536, "tile/0/255 tile/entries/255 tile/1/000 tile/2/000.p/1"},
		{256, 256, ""},
	} {
		var got []string
		for _, r := range tlogpub.NeededTiles(tc.old, tc.new) {
			got = append(got, r.Path())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("NeededTiles(%d, %d) = %q, want %q", tc.old, tc.new, got, tc.want)
		}
	}
}

// TestPublishDir publishes to file:///DIR and reads the directory over a
// plain HTTP file server with x/mod's tlog code; a tile overwritten in
// the directory stops the next round with the tile's name.
func TestPublishDir(t *testing.T) {
	ctx := context.Background()
	st := tlogdb.SQLite(t)
	l, vkey := openLog(t, st, tlogtest.Origin, "dir")
	dir := t.TempDir()
	b, err := tlogpub.Open("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	p := tlogpub.New(l, b, tlogpub.Config{})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	tlogdb.AppendSQLite(t, st, "s", 0, 600)
	tlogtest.IntegrateAll(t, l)
	if size, err := p.Publish(ctx); err != nil || size != 600 {
		t.Fatalf("publish: %d, %v", size, err)
	}
	resp, cp, err := httpGet(srv.URL + "/checkpoint")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status, err)
	}
	n, h := tlogtest.OpenCheckpoint(t, vkey, cp)
	audit(t, srv.URL, sumtlog.Tree{N: n, Hash: h}, []int64{0, 599})

	// A foreign object where the next round's tile goes stops the round
	// with its name, before the checkpoint moves.
	if err := os.MkdirAll(filepath.Join(dir, "tile", "0", "002.p"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tile", "0", "002.p", "89"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	tlogdb.AppendSQLite(t, st, "s", 600, 1)
	tlogtest.IntegrateAll(t, l)
	_, err = p.Publish(ctx)
	if err == nil || !strings.Contains(err.Error(), "tile/0/002.p/89 in file://"+dir+" holds other bytes") {
		t.Fatalf("publish over a foreign tile: %v", err)
	}
	if resp, cp2, _ := httpGet(srv.URL + "/checkpoint"); resp.StatusCode != http.StatusOK || string(cp2) != string(cp) {
		t.Fatalf("checkpoint: %s", resp.Status)
	} else if n, _ := tlogtest.OpenCheckpoint(t, vkey, cp2); n != 600 {
		t.Fatalf("the checkpoint moved past a tile it lacks: %d", n)
	}
}

// TestOpenRefuses: bad --publish values are refused with what is wrong,
// never quoting a secret.
func TestOpenRefuses(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	const secret = "s3cret-Op9"
	for _, tc := range []struct{ url, want string }{
		{"s3://log/p?endpoint=http://127.0.0.1:9", "no credentials"},
		{"s3://k:" + secret + "@log/p", "must not carry credentials"},
		{"s3://log/p?region=x&tls=1", `unknown parameter "tls"`},
		{"s3://log/../p?endpoint=http://h:1", "not a clean path"},
		{"file://host/dir", "want file:///DIR"},
		{"file:///dir?x=1", "want file:///DIR"},
		{"ftp://x/y", "scheme must be s3 or file"},
		{"s3://k:" + secret + "@%zz/", "not a URL"},
	} {
		_, err := tlogpub.Open(tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%q): %v, want %q", strings.ReplaceAll(tc.url, secret, "SECRET"), err, tc.want)
		}
	}
	if _, err := tlogpub.Open("s3://log/p?credentials=" + filepath.Join(t.TempDir(), "none")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing credentials file: %v", err)
	}
}
