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
