package tlog

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
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
// block). tlog-checkpoint: origin, decimal size without leading zeros, base64
// root; our logs write no extension lines, so any are refused.
func ParseCheckpoint(text []byte) (Checkpoint, error) {
	var c Checkpoint
	if !utf8.Valid(text) {
		return c, errors.New("checkpoint: not valid UTF-8")
	}
	lines := strings.SplitAfter(string(text), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return c, fmt.Errorf("checkpoint: want 3 newline-terminated lines, got %q", text)
	}
	c.Origin = strings.TrimSuffix(lines[0], "\n")
	if c.Origin == "" {
		return c, errors.New("checkpoint: empty origin line")
	}
	sizeStr := strings.TrimSuffix(lines[1], "\n")
	size, err := strconv.ParseUint(sizeStr, 10, 64)
	if err != nil || (len(sizeStr) > 1 && sizeStr[0] == '0') || sizeStr[0] == '+' {
		return c, fmt.Errorf("checkpoint: line 2: size %q is not a decimal without leading zeros", sizeStr)
	}
	c.Size = size
	root, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSuffix(lines[2], "\n"))
	if err != nil || len(root) != HashSize {
		return c, fmt.Errorf("checkpoint: line 3: root is not base64 of 32 bytes")
	}
	copy(c.Root[:], root)
	if !bytes.Equal(c.Marshal(), text) {
		return c, errors.New("checkpoint: not in canonical form")
	}
	return c, nil
}
