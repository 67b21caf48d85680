package tlogserve_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/acsledger/acsledger/web/internal/webtest"
	"github.com/acsledger/acsledger/web/tlogserve"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	sumtlog "golang.org/x/mod/sumdb/tlog"
)

type served struct {
	url  string
	vkey string
	log  *tlog.Log
}

// serve starts a real HTTP server on a loopback port over a SQLite log
// holding n entries of session "s".
func serve(t *testing.T, n int64) served { return serveSession(t, "s", n) }

func serveSession(t *testing.T, session string, n int64) served {
	t.Helper()
	st := tlogdb.SQLite(t)
	skey, vkey, err := tlog.KeyFromSeed(tlogtest.Origin, tlog.Ed25519, tlogtest.Seed("serve"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tlog.New(context.Background(), st.LogStorage(), tlog.Config{Origin: tlogtest.Origin, Keys: []string{skey}})
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		tlogdb.AppendSQLite(t, st, session, 0, n)
		tlogtest.IntegrateAll(t, l)
	}
	srv := httptest.NewServer(tlogserve.Handler(l, nil))
	t.Cleanup(srv.Close)
	return served{url: srv.URL, vkey: vkey, log: l}
}

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	return webtest.Get(t, url)
}

// httpTiles is a sumdb/tlog TileReader fetching C2SP tile paths over HTTP.
type httpTiles struct {
	t    *testing.T
	base string
}

func (h httpTiles) Height() int                        { return 8 }
func (h httpTiles) SaveTiles([]sumtlog.Tile, [][]byte) {}
func (h httpTiles) ReadTiles(tiles []sumtlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, tile := range tiles {
		// sumdb writes "tile/8/L/N"; C2SP drops the height.
		path := "tile/" + strings.TrimPrefix(tile.Path(), "tile/8/")
		resp, b := get(h.t, h.base+"/"+path)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		out[i] = b
	}
	return out, nil
}

// checkpointOf verifies the served checkpoint with sumdb/note only.
func checkpointOf(t *testing.T, s served) (int64, sumtlog.Hash) {
	t.Helper()
	resp, body := get(t, s.url+"/checkpoint")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /checkpoint: %s %s", resp.Status, body)
	}
	v, err := note.NewVerifier(s.vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(body, note.VerifierList(v))
	if err != nil {
		t.Fatalf("checkpoint does not verify: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	size, _ := strconv.ParseInt(lines[1], 10, 64)
	root, _ := base64.StdEncoding.DecodeString(lines[2])
	return size, sumtlog.Hash(root)
}

func TestServedTilesVerifyWithSumdb(t *testing.T) {
	t.Parallel()
	s := serve(t, 700)
	size, root := checkpointOf(t, s)
	if size != 700 {
		t.Fatalf("size %d", size)
	}
	hr := sumtlog.TileHashReader(sumtlog.Tree{N: size, Hash: root}, httpTiles{t, s.url})
	for b := int64(0); b*256 < size; b++ {
		w := min(size-b*256, 256)
		path := fmt.Sprintf("/tile/entries/%03d", b)
		if w < 256 {
			path += fmt.Sprintf(".p/%d", w)
		}
		resp, bundle := get(t, s.url+path)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		leaves, err := tlog.ParseBundle(bundle)
		if err != nil || int64(len(leaves)) != w {
			t.Fatalf("%s: %d leaves, %v", path, len(leaves), err)
		}
		for j, leaf := range leaves {
			i := b*256 + int64(j)
			p, err := sumtlog.ProveRecord(size, i, hr)
			if err != nil {
				t.Fatal(err)
			}
			if err := sumtlog.CheckRecord(p, size, root, i, sumtlog.RecordHash(leaf)); err != nil {
				t.Fatalf("leaf %d: %v", i, err)
			}
		}
	}
}

func TestCacheHeadersAndErrors(t *testing.T) {
	t.Parallel()
	s := serve(t, 300)
	for _, c := range []struct {
		path   string
		status int
		cache  string
		body   string
	}{
		{"/tile/0/000", 200, "public, max-age=31536000, immutable", ""},
		{"/tile/0/001.p/44", 200, "public, max-age=60", ""},
		{"/tile/0/001.p/45", 404, "no-store", "beyond"},
		{"/tile/0/001", 404, "no-store", "beyond"},
		{"/tile/1/000.p/1", 200, "public, max-age=60", ""},
		{"/tile/1/000.p/2", 404, "no-store", "beyond"},
		{"/tile/entries/000", 200, "public, max-age=31536000, immutable", ""},
		{"/tile/0/1", 400, "no-store", "three decimal digits"},
		{"/tile/0/000.p/0", 400, "no-store", "partial width"},
		{"/tile/9/000", 400, "no-store", "level"},
		{"/tile/0/x000/001", 400, "no-store", "leading zero"},
		{"/api/v1/proofs/consistency?old=10&new=5", 400, "no-store", "larger than new size"},
		{"/api/v1/proofs/consistency?old=10&new=500", 400, "no-store", "checkpoint size 300"},
		{"/api/v1/proofs/consistency?old=abc", 400, "no-store", "not a decimal"},
		{"/api/v1/proofs/inclusion?entry_hash=zz", 400, "no-store", "64 lowercase hex"},
		{"/api/v1/proofs/inclusion?entry_hash=" + strings.Repeat("0", 64), 404, "no-store", "no leaf"},
		{"/api/v1/proofs/inclusion?entry_hash=" + strings.Repeat("A", 64), 400, "no-store", "lowercase"},
		{"/api/v1/proofs/entry/s/-1", 400, "no-store", "non-negative"},
		{"/api/v1/proofs/entry/s/300", 404, "no-store", "no leaf"},
		{"/api/v1/proofs/entry/nobody/0", 404, "no-store", "no leaf"},
	} {
		resp, body := get(t, s.url+c.path)
		if resp.StatusCode != c.status || resp.Header.Get("Cache-Control") != c.cache || !strings.Contains(string(body), c.body) {
			t.Errorf("GET %s: %d %q %q, want %d %q containing %q", c.path, resp.StatusCode, resp.Header.Get("Cache-Control"), body, c.status, c.cache, c.body)
		}
	}
	if resp, b := get(t, s.url+"/tile/0/000"); len(b) != 256*32 || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("full tile: %d bytes, %s", len(b), resp.Header.Get("Content-Type"))
	}
}

func TestEmptyLogHasNoCheckpoint(t *testing.T) {
	t.Parallel()
	s := serve(t, 0)
	if resp, _ := get(t, s.url+"/checkpoint"); resp.StatusCode != 404 {
		t.Fatalf("GET /checkpoint on an empty log: %s", resp.Status)
	}
}

func TestProofAPI(t *testing.T) {
	t.Parallel()
	s := serve(t, 500)
	size, root := checkpointOf(t, s)
	h := rfc6962.DefaultHasher

	// tlog-proof for one entry.
	resp, doc := get(t, s.url+"/api/v1/proofs/entry/s/321")
	if resp.StatusCode != 200 {
		t.Fatalf("entry proof: %s %s", resp.Status, doc)
	}
	p, _ := tlogtest.ParseEntryProof(t, doc, 321)
	eh := tlogtest.EntryHash("s", 321)
	leaf, _ := tlog.Leaf{SessionID: "s", Position: 321, EntryHash: eh}.MarshalJCS()
	if err := proof.VerifyInclusion(h, 321, uint64(size), h.HashLeaf(leaf), p, root[:]); err != nil {
		t.Fatalf("tlog-proof: %v", err)
	}

	// Inclusion by entry_hash in an older tree size.
	resp, body := get(t, fmt.Sprintf("%s/api/v1/proofs/inclusion?entry_hash=%x&tree_size=400", s.url, eh))
	var inc tlogserve.InclusionResponse
	if resp.StatusCode != 200 || json.Unmarshal(body, &inc) != nil || inc.LeafIndex != 321 || inc.TreeSize != 400 {
		t.Fatalf("inclusion: %s %s", resp.Status, body)
	}
	// The root at 400 comes from the served tiles, through sumdb/tlog.
	root400, err := sumtlog.TreeHash(400, sumtlog.TileHashReader(sumtlog.Tree{N: size, Hash: root}, httpTiles{t, s.url}))
	if err != nil {
		t.Fatal(err)
	}
	if err := proof.VerifyInclusion(h, 321, 400, h.HashLeaf(leaf), decode(t, inc.Proof), root400[:]); err != nil {
		t.Fatalf("inclusion at 400: %v", err)
	}

	// Consistency 400 -> latest.
	resp, body = get(t, s.url+"/api/v1/proofs/consistency?old=400")
	var cons tlogserve.ConsistencyResponse
	if resp.StatusCode != 200 || json.Unmarshal(body, &cons) != nil || cons.NewSize != uint64(size) {
		t.Fatalf("consistency: %s %s", resp.Status, body)
	}
	if err := proof.VerifyConsistency(h, 400, uint64(size), decode(t, cons.Proof), root400[:], root[:]); err != nil {
		t.Fatalf("consistency: %v", err)
	}
}

func decode(t *testing.T, in []string) [][]byte {
	out := make([][]byte, len(in))
	for i, s := range in {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

func TestEntryProofEscapedSession(t *testing.T) {
	t.Parallel()
	s := serveSession(t, "team/a b", 3)
	resp, body := get(t, s.url+"/api/v1/proofs/entry/team%2Fa%20b/2")
	if resp.StatusCode != 200 || !strings.Contains(string(body), "\nindex 2\n") {
		t.Fatalf("escaped session: %s %q", resp.Status, body)
	}
}
