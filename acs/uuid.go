package acs

import (
	"crypto/rand"
	"fmt"
)

// NewUUID returns a random (version 4) UUID in its canonical lowercase text
// form. ACS request, hello and ASK ids are UUIDs; this is the one maker the
// tree uses for them and for every other random id (RFC 9562 §5.4).
func NewUUID() string {
	var b [16]byte
	// crypto/rand.Read never returns an error (Go 1.24 and later).
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
