// Package sig implements the signatures of ACS v0.1.0 §10: the signed input
// of a JSON-RPC envelope, the algorithm registry of §10.1, the hybrid value
// encoding of §10.2, key sets, and the key files acsledger reads and writes.
//
// Signed input (ACS §10, DESIGN.md): the UTF-8 [RFC 8785] canonical form of
// the whole envelope with exactly one member removed: params.signature in a
// request, result.signature in a result (ServerHello included),
// error.signature in an error response. Input that the canonicalizer refuses
// (duplicate members, invalid UTF-8, lone surrogates, numbers beyond the
// IEEE 754 double range) is refused before any key is looked at.
//
// Values are standard base64 with padding. Where ACS is silent we chose, and
// docs/signatures.md documents for peers:
//
//   - HMAC-SHA256: the per-session key is HKDF-SHA256(IKM, salt empty,
//     info = UTF-8 session_id, L = 32) ([RFC 5869]); the value is the
//     32-byte MAC.
//   - ECDSA-P256: ASN.1 DER (r, s) over SHA-256 of the input.
//   - RSA-PSS-SHA256: RSASSA-PSS, SHA-256, MGF1-SHA-256, salt length 32.
//   - ML-DSA-44/65/87: [FIPS 204] pure ML-DSA, empty context, hedged signing.
//   - SLH-DSA-128s/128f: [FIPS 205] SLH-DSA-SHA2-128s and SLH-DSA-SHA2-128f
//     (the SHA2 parameter sets, not SHAKE), pure, empty context, hedged.
//   - ML-DSA-65+ECDSA-P256, ML-DSA-65+RSA-PSS-SHA256: §10.2, each component
//     prefixed by its 4-byte big-endian length, the PQC component first.
//
// [RFC 8785]: https://www.rfc-editor.org/rfc/rfc8785
// [RFC 5869]: https://www.rfc-editor.org/rfc/rfc5869
// [FIPS 204]: https://doi.org/10.6028/NIST.FIPS.204
// [FIPS 205]: https://doi.org/10.6028/NIST.FIPS.205
package sig
