package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acsledger/acsledger/verify"
)

// --log-url: the log as published to object storage (docs/object-storage.md)
// or served by acsledger, read with plain GETs of its C2SP paths. Nothing
// fetched is trusted: the checkpoint must verify with --log-key, and the
// tiles are authenticated against its root by x/mod's tile reader before
// they make a proof, which verify then checks like any other.

// maxObject bounds one fetched object: a checkpoint with cosignatures or
// a tile of 256 hashes is far below it.
const maxObject = 1 << 20

var logClient = &http.Client{Timeout: time.Minute}

func fetch(base, path string) ([]byte, error) {
	u := strings.TrimSuffix(base, "/") + "/" + path
	resp, err := logClient.Get(u)
	if err != nil {
		return nil, fmt.Errorf("--log-url: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("--log-url: GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxObject+1))
	if err != nil {
		return nil, fmt.Errorf("--log-url: GET %s: %v", u, err)
	}
	if len(b) > maxObject {
		return nil, fmt.Errorf("--log-url: GET %s: larger than %d bytes", u, maxObject)
	}
	return b, nil
}

// urlTiles is a sumdb/tlog TileReader over C2SP paths (sumdb spells them
// tile/8/L/N, C2SP drops the height).
type urlTiles struct{ base string }

func (u urlTiles) Height() int                        { return 8 }
func (u urlTiles) SaveTiles([]sumtlog.Tile, [][]byte) {}
func (u urlTiles) ReadTiles(tiles []sumtlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		b, err := fetch(u.base, "tile/"+strings.TrimPrefix(t.Path(), "tile/8/"))
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// checkLogURL checks the --log-url value: http(s), no credentials.
func checkLogURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--log-url must be an http(s) URL of the published log")
	}
	if u.User != nil {
		return fmt.Errorf("--log-url must not carry credentials: the published log is public")
	}
	return nil
}

// logURLCheckpoint fetches the log's current checkpoint from base and
// proves, from base's tiles, that it extends the receipt's tree.
func logURLCheckpoint(doc []byte, base string) (*verify.NewerCheckpoint, error) {
	r, err := verify.ParseReceipt(doc)
	if err != nil {
		return nil, err
	}
	text, _, _ := bytes.Cut(r.Checkpoint, []byte("\n\n"))
	old, err := verify.ParseCheckpointHead(append(text, '\n'))
	if err != nil {
		return nil, fmt.Errorf("the receipt's checkpoint: %v", err)
	}
	signed, err := fetch(base, "checkpoint")
	if err != nil {
		return nil, err
	}
	ntext, _, _ := bytes.Cut(signed, []byte("\n\n"))
	cur, err := verify.ParseCheckpointHead(append(ntext, '\n'))
	if err != nil {
		return nil, fmt.Errorf("--log-url: the published checkpoint: %v", err)
	}
	nc := &verify.NewerCheckpoint{Signed: signed}
	if cur.Size <= old.Size {
		return nc, nil // same tree (roots compared) or an older one (refused by verify)
	}
	tree := sumtlog.Tree{N: int64(cur.Size), Hash: sumtlog.Hash(cur.Root)}
	p, err := sumtlog.ProveTree(tree.N, int64(old.Size), sumtlog.TileHashReader(tree, urlTiles{base}))
	if err != nil {
		return nil, fmt.Errorf("--log-url: couldn't prove tree %d consistent with %d from the published tiles: %v", old.Size, cur.Size, err)
	}
	for _, h := range p {
		nc.Consistency = append(nc.Consistency, append([]byte(nil), h[:]...))
	}
	return nc, nil
}
