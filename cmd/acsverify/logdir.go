package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acsledger/acsledger/verify"
)

// --log-dir: a copy of the log as published to object storage
// (docs/object-storage.md), fetched by the auditor with any tool (`aws s3
// sync`, `wget --mirror` of a bucket behind a CDN), laid out by its C2SP
// paths. acsverify itself opens no connection: it stays an offline tool
// (internal/layering). Nothing read is trusted: the checkpoint must verify
// with --log-key, and the tiles are authenticated against its root by
// x/mod's tile reader before they make a proof, which verify then checks
// like any other.

// maxObject bounds one object read: a checkpoint with cosignatures or a
// tile of 256 hashes is far below it.
const maxObject = 1 << 20

// readObject reads the C2SP path of the log copy in dir.
func readObject(dir, path string) ([]byte, error) {
	name := filepath.Join(dir, filepath.FromSlash(path))
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--log-dir: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxObject+1))
	if err != nil {
		return nil, fmt.Errorf("--log-dir: %s: %v", name, err)
	}
	if len(b) > maxObject {
		return nil, fmt.Errorf("--log-dir: %s: larger than %d bytes", name, maxObject)
	}
	return b, nil
}

// dirTiles is a sumdb/tlog TileReader over C2SP paths (sumdb spells them
// tile/8/L/N, C2SP drops the height).
type dirTiles struct{ dir string }

func (d dirTiles) Height() int                        { return 8 }
func (d dirTiles) SaveTiles([]sumtlog.Tile, [][]byte) {}
func (d dirTiles) ReadTiles(tiles []sumtlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		b, err := readObject(d.dir, "tile/"+strings.TrimPrefix(t.Path(), "tile/8/"))
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// logDirCheckpoint reads the log's checkpoint from the copy in dir and
// proves, from its tiles, that it extends the receipt's tree.
func logDirCheckpoint(doc []byte, dir string) (*verify.NewerCheckpoint, error) {
	r, err := verify.ParseReceipt(doc)
	if err != nil {
		return nil, err
	}
	text, _, _ := bytes.Cut(r.Checkpoint, []byte("\n\n"))
	old, err := verify.ParseCheckpointHead(append(text, '\n'))
	if err != nil {
		return nil, fmt.Errorf("the receipt's checkpoint: %v", err)
	}
	signed, err := readObject(dir, "checkpoint")
	if err != nil {
		return nil, err
	}
	ntext, _, _ := bytes.Cut(signed, []byte("\n\n"))
	cur, err := verify.ParseCheckpointHead(append(ntext, '\n'))
	if err != nil {
		return nil, fmt.Errorf("--log-dir: the published checkpoint: %v", err)
	}
	nc := &verify.NewerCheckpoint{Signed: signed}
	if cur.Size <= old.Size {
		return nc, nil // same tree (roots compared) or an older one (refused by verify)
	}
	tree := sumtlog.Tree{N: int64(cur.Size), Hash: sumtlog.Hash(cur.Root)}
	p, err := sumtlog.ProveTree(tree.N, int64(old.Size), sumtlog.TileHashReader(tree, dirTiles{dir}))
	if err != nil {
		return nil, fmt.Errorf("--log-dir: couldn't prove tree %d consistent with %d from the published tiles: %v", old.Size, cur.Size, err)
	}
	for _, h := range p {
		nc.Consistency = append(nc.Consistency, append([]byte(nil), h[:]...))
	}
	return nc, nil
}
