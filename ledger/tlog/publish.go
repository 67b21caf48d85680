package tlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/acsledger/acsledger/internal/durable"
)

// publishCheckpoint writes a checkpoint to dir/checkpoint.<size> with
// O_EXCL, so a published checkpoint is never overwritten. A file already
// holding the same bytes is fine (a retry after a crash); different bytes
// for the same size are an error: two trees for one size must never be
// published silently.
func publishCheckpoint(dir string, size uint64, signed []byte) error {
	name := filepath.Join(dir, fmt.Sprintf("checkpoint.%d", size))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if errors.Is(err, fs.ErrExist) {
		old, rerr := os.ReadFile(name)
		if rerr != nil {
			return rerr
		}
		if string(old) != string(signed) {
			return fmt.Errorf("%s exists with a different checkpoint", name)
		}
		return nil
	}
	if err != nil {
		return err
	}
	return durable.Write(f, signed)
}
