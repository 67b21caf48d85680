package sig

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrHybridEncoding is returned by DecodeHybrid for a value that is not
// exactly two length-prefixed components.
var ErrHybridEncoding = errors.New("malformed hybrid signature value")

// EncodeHybrid returns len(pqc) || pqc || len(classical) || classical, each
// len a 4-byte big-endian unsigned integer (ACS §10.2). The same framing is
// used for hybrid key material in key files.
func EncodeHybrid(pqc, classical []byte) []byte {
	out := make([]byte, 0, 8+len(pqc)+len(classical))
	out = binary.BigEndian.AppendUint32(out, uint32(len(pqc)))
	out = append(out, pqc...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(classical)))
	return append(out, classical...)
}

// DecodeHybrid splits a §10.2 value into its PQC and classical components.
// It refuses a truncated length or component, an empty component and bytes
// after the second component: a value has exactly one reading.
func DecodeHybrid(v []byte) (pqc, classical []byte, err error) {
	rest := v
	next := func(which string) ([]byte, error) {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: %s length truncated at byte %d", ErrHybridEncoding, which, len(v)-len(rest))
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if n == 0 {
			return nil, fmt.Errorf("%w: %s component is empty", ErrHybridEncoding, which)
		}
		if uint64(n) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: %s component claims %d bytes, %d remain", ErrHybridEncoding, which, n, len(rest))
		}
		c := rest[:n:n]
		rest = rest[n:]
		return c, nil
	}
	if pqc, err = next("PQC"); err != nil {
		return nil, nil, err
	}
	if classical, err = next("classical"); err != nil {
		return nil, nil, err
	}
	if len(rest) != 0 {
		return nil, nil, fmt.Errorf("%w: %d bytes after the classical component", ErrHybridEncoding, len(rest))
	}
	return pqc, classical, nil
}
