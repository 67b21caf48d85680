package exportsink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// dirStore puts files under a root directory: each is written under a
// temporary name in ROOT/.tmp (which lake readers skip: Hive, Spark,
// Athena and DuckDB ignore names starting with '.'), fsynced, renamed
// into its partition directory and the directories fsynced, so a reader
// sees a file whole or not at all, and a crash leaves at most a
// temporary file, which the next open of the sink removes.
type dirStore struct {
	root, tmp, name string
}

func openDirStore(root, name string) (*dirStore, error) {
	d := &dirStore{root: root, tmp: filepath.Join(root, ".tmp"), name: name}
	if err := os.MkdirAll(d.tmp, 0o750); err != nil {
		return nil, fmt.Errorf("couldn't create %s: %w", d.tmp, err)
	}
	// What a crash of this sink left half-written.
	old, err := filepath.Glob(filepath.Join(d.tmp, name+"-*.tmp"))
	if err != nil {
		return nil, err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return nil, fmt.Errorf("couldn't remove the unfinished %s: %w", f, err)
		}
	}
	return d, nil
}

func (d *dirStore) put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	final := filepath.Join(d.root, filepath.FromSlash(key))
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(d.tmp, d.name+"-"+hex.EncodeToString(rnd[:])+".tmp")
	if err := writeSynced(tmp, data); err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename is durable once the partition directory is synced, and
	// a partition directory made here once its parent is, up to the root.
	dir := filepath.Dir(final)
	made := []string{}
	for p := dir; p != d.root && strings.HasPrefix(p, d.root); p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
		made = append(made, filepath.Dir(p))
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return err
	}
	for _, p := range append([]string{dir}, made...) {
		if err := syncDir(p); err != nil {
			return err
		}
	}
	return nil
}

// writeSynced writes data to a new file at name and fsyncs it.
func writeSynced(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	return err
}
