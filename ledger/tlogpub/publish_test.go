package tlogpub_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/mod/sumdb/note"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acsledger/acsledger/internal/s3test"
	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/acsledger/acsledger/ledger/tlogpub"
)

// fixture is a SQLite log and a SeaweedFS bucket "log" readable by
// anyone, published to under the prefix "pub/".
type fixture struct {
	weed *s3test.Server
	st   *sqlitestore.Store
	log  *tlog.Log
	vkey string
	base string // http://HOST:PORT/log/pub: the public URL of the published log
	url  string // the --publish URL
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	w := s3test.Start(t, "log", s3test.Options{PublicRead: true})
	t.Setenv("AWS_ACCESS_KEY_ID", w.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", w.Secret)
	f := &fixture{weed: w, st: tlogdb.SQLite(t)}
	f.log, f.vkey = openLog(t, f.st, tlogtest.Origin, "publish")
	f.base = "http://" + w.Endpoint + "/log/pub"
	f.url = "s3://log/pub?endpoint=http://" + w.Endpoint
	return f
}

func openLog(t *testing.T, st *sqlitestore.Store, origin, seed string) (*tlog.Log, string) {
	t.Helper()
	skey, vkey, err := tlog.KeyFromSeed(origin, tlog.Ed25519, tlogtest.Seed(seed))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tlog.New(context.Background(), st.LogStorage(), tlog.Config{Origin: origin, Keys: []string{skey}})
	if err != nil {
		t.Fatal(err)
	}
	return l, vkey
}

func (f *fixture) publisher(t *testing.T) *tlogpub.Publisher {
	t.Helper()
	b, err := tlogpub.Open(f.url)
	if err != nil {
		t.Fatal(err)
	}
	p := tlogpub.New(f.log, b, tlogpub.Config{})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// httpGet is a plain anonymous GET of the public log, as a CDN or an
// auditor's tiles client makes it.
func httpGet(url string) (*http.Response, []byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// bucketTiles is a sumdb/tlog TileReader over the bucket's public URL.
type bucketTiles struct{ base string }

func (h bucketTiles) Height() int                        { return 8 }
func (h bucketTiles) SaveTiles([]sumtlog.Tile, [][]byte) {}
func (h bucketTiles) ReadTiles(tiles []sumtlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, tile := range tiles {
		// sumdb spells "tile/8/L/N"; C2SP drops the height.
		path := "tile/" + strings.TrimPrefix(tile.Path(), "tile/8/")
		resp, b, err := httpGet(h.base + "/" + path)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		out[i] = b
	}
	return out, nil
}

// readCheckpoint fetches and verifies the bucket's checkpoint with the
// log's verifier key alone.
func readCheckpoint(t *testing.T, base, vkey string) sumtlog.Tree {
	t.Helper()
	resp, b, err := httpGet(base + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET checkpoint: %s", resp.Status)
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=5") {
		t.Errorf("checkpoint Cache-Control %q", cc)
	}
	n, h := tlogtest.OpenCheckpoint(t, vkey, b)
	return sumtlog.Tree{N: n, Hash: h}
}

// audit checks the published tree from the bucket alone: every leaf of
// every entry bundle hashes to its level-0 hash in tree's tiles, and each
// of the given leaves has an inclusion proof to tree's root.
func audit(t *testing.T, base string, tree sumtlog.Tree, proveAt []int64) {
	t.Helper()
	thr := sumtlog.TileHashReader(tree, bucketTiles{base})
	var leaves [][]byte
	for n := int64(0); n*256 < tree.N; n++ {
		w := min(tree.N-n*256, 256)
		path := tlog.TilePath(tlog.EntriesLevel, uint64(n), int(w))
		resp, b, err := httpGet(base + "/" + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", path, resp.Status, err)
		}
		got, err := tlog.ParseBundle(b)
		if err != nil || int64(len(got)) != w {
			t.Fatalf("%s: %d leaves, want %d (%v)", path, len(got), w, err)
		}
		leaves = append(leaves, got...)
	}
	if int64(len(leaves)) != tree.N {
		t.Fatalf("bundles hold %d leaves, the checkpoint %d", len(leaves), tree.N)
	}
	idx := make([]int64, tree.N)
	for i := range idx {
		idx[i] = sumtlog.StoredHashIndex(0, int64(i))
	}
	hashes, err := thr.ReadHashes(idx)
	if err != nil {
		t.Fatalf("tiles of tree %d: %v", tree.N, err)
	}
	for i, leaf := range leaves {
		if sumtlog.RecordHash(leaf) != hashes[i] {
			t.Fatalf("leaf %d of the entry bundles does not hash to its tile hash", i)
		}
	}
	for _, i := range proveAt {
		p, err := sumtlog.ProveRecord(tree.N, i, thr)
		if err != nil {
			t.Fatalf("inclusion proof of %d in %d: %v", i, tree.N, err)
		}
		if err := sumtlog.CheckRecord(p, tree.N, tree.Hash, i, sumtlog.RecordHash(leaves[i])); err != nil {
			t.Fatalf("inclusion of %d in %d: %v", i, tree.N, err)
		}
	}
}

// TestPublishSeaweedFS publishes a log to SeaweedFS twice (300 leaves,
// then 1,000) and checks it from the bucket alone, with plain HTTP GETs
// and x/mod's tlog code: the checkpoint's signature, every leaf of every
// entry bundle against the tiles, inclusion proofs in both trees and the
// consistency proof between them. A second publisher resumes from the
// bucket; another log's publisher is refused and writes nothing.
func TestPublishSeaweedFS(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	p := f.publisher(t)
	if size, err := p.Publish(ctx); err != nil || size != 0 {
		t.Fatalf("publish of an empty log: %d, %v", size, err)
	}
	if resp, _, err := httpGet(f.base + "/checkpoint"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("checkpoint of an empty log: %v %v", resp.Status, err)
	}

	tlogdb.AppendSQLite(t, f.st, "s", 0, 300)
	tlogtest.IntegrateAll(t, f.log)
	if size, err := p.Publish(ctx); err != nil || size != 300 {
		t.Fatalf("publish: %d, %v", size, err)
	}
	older := readCheckpoint(t, f.base, f.vkey)
	if older.N != 300 {
		t.Fatalf("published size %d", older.N)
	}
	// 300 leaves: tile 0/000 and bundle 000 full, 0/001.p/44 and
	// entries/001.p/44, and level 1's 1/000.p/1.
	if got := p.Status().Tiles; got != 5 {
		t.Errorf("wrote %d tiles for 300 leaves, want 5", got)
	}
	audit(t, f.base, older, []int64{0, 255, 256, 299})

	tlogdb.AppendSQLite(t, f.st, "s", 300, 700)
	tlogtest.IntegrateAll(t, f.log)
	if size, err := p.Publish(ctx); err != nil || size != 1000 {
		t.Fatalf("publish: %d, %v", size, err)
	}
	newer := readCheckpoint(t, f.base, f.vkey)
	if newer.N != 1000 {
		t.Fatalf("published size %d", newer.N)
	}
	audit(t, f.base, newer, []int64{0, 299, 300, 511, 512, 999})
	// The older tree is still provable: its partial tiles stay.
	audit(t, f.base, older, []int64{1, 298})
	pr, err := sumtlog.ProveTree(newer.N, older.N, sumtlog.TileHashReader(newer, bucketTiles{f.base}))
	if err != nil {
		t.Fatal(err)
	}
	if err := sumtlog.CheckTree(pr, newer.N, newer.Hash, older.N, older.Hash); err != nil {
		t.Fatalf("consistency %d..%d: %v", older.N, newer.N, err)
	}
	resp, _, err := httpGet(f.base + "/tile/0/001")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status, err)
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
		t.Errorf("full tile Cache-Control %q", cc)
	}

	// A second publisher (a restart) resumes from the bucket.
	p2 := f.publisher(t)
	if st := p2.Status(); st.Published != 1000 {
		t.Fatalf("resumed at %d", st.Published)
	}
	if size, err := p2.Publish(ctx); err != nil || size != 1000 || p2.Status().Tiles != 0 {
		t.Fatalf("idle round after a restart: %d, %d tiles, %v", size, p2.Status().Tiles, err)
	}

	// Another log (another key and origin) is refused the bucket.
	other, _ := openLog(t, tlogdb.SQLite(t), "other.test/log", "other")
	b, err := tlogpub.Open(f.url)
	if err != nil {
		t.Fatal(err)
	}
	err = tlogpub.New(other, b, tlogpub.Config{}).Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "not a checkpoint signed by this log's key") || !strings.Contains(err.Error(), "s3://log/pub/") {
		t.Fatalf("another log's bucket: %v", err)
	}
	if got := readCheckpoint(t, f.base, f.vkey); got != newer {
		t.Fatalf("checkpoint changed to %+v", got)
	}
}

// TestPublishStoreDown stops SeaweedFS while the log grows: rounds fail
// and are counted, the bucket keeps a checkpoint whose tiles are all
// there; once the store is back the next round catches up.
func TestPublishStoreDown(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	p := f.publisher(t)
	tlogdb.AppendSQLite(t, f.st, "s", 0, 200)
	tlogtest.IntegrateAll(t, f.log)
	if size, err := p.Publish(ctx); err != nil || size != 200 {
		t.Fatalf("publish: %d, %v", size, err)
	}
	f.weed.Stop()
	tlogdb.AppendSQLite(t, f.st, "s", 200, 400)
	tlogtest.IntegrateAll(t, f.log)
	if _, err := p.Publish(ctx); err == nil {
		t.Fatal("publish to a stopped store succeeded")
	}
	if st := p.Status(); st.Failures != 1 || st.LastError == "" || st.Published != 200 {
		t.Fatalf("status after a failure: %+v", st)
	}
	if strings.Contains(p.Status().LastError, f.weed.Secret) {
		t.Fatal("the error quotes the secret key")
	}
	f.weed.Restart("log")
	got := readCheckpoint(t, f.base, f.vkey)
	if got.N != 200 {
		t.Fatalf("checkpoint after the outage: %d", got.N)
	}
	audit(t, f.base, got, []int64{0, 199})
	if size, err := p.Publish(ctx); err != nil || size != 600 {
		t.Fatalf("catch-up: %d, %v", size, err)
	}
	audit(t, f.base, readCheckpoint(t, f.base, f.vkey), []int64{0, 199, 200, 599})
}

// TestCreateIsConditional: SeaweedFS honours If-None-Match: *, so a tile
// is never overwritten by the publisher.
func TestCreateIsConditional(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	b, err := tlogpub.Open(f.url)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, "tile/0/000", []byte("one"), tlogpub.Object{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, "tile/0/000", []byte("two"), tlogpub.Object{}); !errors.Is(err, tlogpub.ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	obj, err := f.weed.Client.GetObject(ctx, "log", "pub/tile/0/000", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	if got, _ := io.ReadAll(obj); string(got) != "one" {
		t.Fatalf("tile holds %q", got)
	}
}

// TestPublishOrderUnderReads runs the publisher's loop while the log
// grows in 12 batches and a reader polls the bucket the whole time: every
// checkpoint it sees must verify and have every tile it needs (the last
// leaf's inclusion is proved from the bucket each time).
func TestPublishOrderUnderReads(t *testing.T) {
	f := newFixture(t)
	b, err := tlogpub.Open(f.url)
	if err != nil {
		t.Fatal(err)
	}
	p := tlogpub.New(f.log, b, tlogpub.Config{Interval: 20 * time.Millisecond})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	const batches, per = 12, 97
	readerErr := make(chan error, 1)
	seen := make(chan int, 1)
	go func() {
		sizes := map[int64]bool{}
		defer func() { seen <- len(sizes) }()
		deadline := time.Now().Add(3 * time.Minute)
		for time.Now().Before(deadline) {
			resp, cp, err := httpGet(f.base + "/checkpoint")
			if err != nil {
				readerErr <- err
				return
			}
			if resp.StatusCode == http.StatusNotFound {
				time.Sleep(5 * time.Millisecond) // poll interval
				continue
			}
			v, err := note.NewVerifier(f.vkey)
			if err != nil {
				readerErr <- err
				return
			}
			n, err := note.Open(cp, note.VerifierList(v))
			if err != nil {
				readerErr <- fmt.Errorf("checkpoint does not verify: %v", err)
				return
			}
			c, err := tlog.ParseCheckpoint([]byte(n.Text))
			if err != nil {
				readerErr <- err
				return
			}
			tree := sumtlog.Tree{N: int64(c.Size), Hash: sumtlog.Hash(c.Root)}
			if _, err := sumtlog.ProveRecord(tree.N, tree.N-1, sumtlog.TileHashReader(tree, bucketTiles{f.base})); err != nil {
				readerErr <- fmt.Errorf("checkpoint %d names tiles the bucket lacks or that do not match: %v", c.Size, err)
				return
			}
			sizes[tree.N] = true
			if tree.N == batches*per {
				return
			}
		}
		readerErr <- errors.New("the bucket never reached the last batch")
	}()
	for i := range batches {
		tlogdb.AppendSQLite(t, f.st, "s", int64(i*per), per)
		tlogtest.IntegrateAll(t, f.log)
	}
	n := <-seen
	select {
	case err := <-readerErr:
		t.Fatal(err)
	default:
	}
	t.Logf("the reader checked %d published sizes", n)
	if st := p.Status(); st.Published != batches*per || st.Failures != 0 {
		t.Errorf("status %+v", st)
	}
}
