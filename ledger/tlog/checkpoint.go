package tlog

import (
	"encoding/base64"
	"fmt"

	"github.com/acsledger/acsledger/verify"
)

// Checkpoint is the body of a c2sp.org/tlog-checkpoint note: the log's origin,
// its size and the RFC 6962 root hash at that size. Extension lines are not
// produced by this log and are refused when parsing our own notes.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   [HashSize]byte
}

// Marshal returns the checkpoint's note text, ending in a newline.
func (c Checkpoint) Marshal() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
}

// ParseCheckpoint parses checkpoint note text (the part before the signature
// block) with the verifier's reader, [verify.ParseCheckpoint]: our logs write
// no extension lines, so any are refused.
func ParseCheckpoint(text []byte) (Checkpoint, error) {
	c, err := verify.ParseCheckpoint(text)
	return Checkpoint(c), err
}
