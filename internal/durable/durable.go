// Package durable writes files that are on stable storage once written:
// the Merkle log's published checkpoints and the witness's state.
package durable

import "os"

// Write writes b to f, flushes f to stable storage (fsync) and closes it.
// f is closed on every path; the first error is returned.
func Write(f *os.File, b []byte) error {
	_, err := f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
