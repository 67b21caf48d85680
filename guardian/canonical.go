package guardian

import (
	"crypto/sha256"

	"github.com/acsledger/acsledger/acs"
)

// requestHash is the request_hash of req (ACS §8.1): the SHA-256 of the
// RFC 8785 form of its params as received, signature included. RFC 8785
// sorts and re-encodes each value on its own, so the params member of the
// canonical body is the canonical form of params: when serve made one, it
// is hashed as it stands rather than canonicalized a second time.
func requestHash(req *request) (acs.Hash, error) {
	if req.canonParams != nil {
		return sha256.Sum256(req.canonParams), nil
	}
	return acs.RequestHash(req.params)
}

// canonicalMember returns the value of the top-level member name of canon,
// an object in RFC 8785 form (no whitespace, strings already checked), or
// nil when it has no such member or is not an object.
func canonicalMember(canon []byte, name string) []byte {
	if len(canon) < 2 || canon[0] != '{' {
		return nil
	}
	i := 1
	for i < len(canon) && canon[i] == '"' {
		keyEnd := skipCanonical(canon, i)
		if keyEnd < 0 || keyEnd >= len(canon) || canon[keyEnd] != ':' {
			return nil
		}
		valEnd := skipCanonical(canon, keyEnd+1)
		if valEnd < 0 {
			return nil
		}
		// Member names in RFC 8785 form escape only '"', '\\' and
		// control characters, none of which name holds, so comparing
		// the quoted bytes is comparing the names.
		if string(canon[i+1:keyEnd-1]) == name {
			return canon[keyEnd+1 : valEnd]
		}
		if valEnd >= len(canon) || canon[valEnd] != ',' {
			return nil
		}
		i = valEnd + 1
	}
	return nil
}

// skipCanonical returns the index just past the value starting at canon[i],
// or -1 when the bytes end first. canon holds no whitespace.
func skipCanonical(canon []byte, i int) int {
	depth := 0
	for ; i < len(canon); i++ {
		switch c := canon[i]; c {
		case '"':
			for i++; i < len(canon) && canon[i] != '"'; i++ {
				if canon[i] == '\\' {
					i++
				}
			}
			if i >= len(canon) {
				return -1
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return -1
			}
		case ',', ':':
			if depth == 0 {
				return i
			}
		default:
			// A number, true, false or null at the top level ends at
			// the next ',', '}' or ']'.
			if depth == 0 {
				j := i
				for j < len(canon) && canon[j] != ',' && canon[j] != '}' && canon[j] != ']' {
					j++
				}
				return j
			}
		}
	}
	return -1
}
