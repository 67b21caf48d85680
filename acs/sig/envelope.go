package sig

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/acsledger/acsledger/acs"
)

// Member names the envelope member that carries the signature.
type Member int

const (
	// Params is a request's params (params.signature).
	Params Member = iota + 1
	// Result is a response's result (result.signature), ServerHello
	// included.
	Result
	// ErrorMember is an error response's error object (error.signature).
	ErrorMember
)

func (m Member) String() string {
	switch m {
	case Params:
		return "params"
	case Result:
		return "result"
	case ErrorMember:
		return "error"
	}
	return fmt.Sprintf("Member(%d)", int(m))
}

// Signature is the { algorithm, value, key_id } object of ACS §10
// (request-envelope.json $defs/Signature). Value holds the decoded bytes;
// on the wire it is standard base64 with padding.
type Signature struct {
	Algorithm Algorithm
	KeyID     string
	Value     []byte
}

// MarshalJSON writes the wire form, members in RFC 8785 order.
func (s Signature) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Algorithm string `json:"algorithm"`
		KeyID     string `json:"key_id"`
		Value     string `json:"value"`
	}{string(s.Algorithm), s.KeyID, base64.StdEncoding.EncodeToString(s.Value)})
}

// Split canonicalizes envelope and separates it into the signed input (the
// canonical form without m's signature member) and that signature. sig is
// nil when the member has no signature. Members of the signature object
// other than algorithm, key_id and value are ignored; like the rest of the
// signature object they are not covered by the signature.
func Split(envelope []byte, m Member) (input []byte, sig *Signature, err error) {
	canon, err := canonicalize(envelope)
	if err != nil {
		return nil, nil, err
	}
	return split(canon, m)
}

// SignedInput returns the signed input of envelope for member m (ACS §10).
func SignedInput(envelope []byte, m Member) ([]byte, error) {
	in, _, err := Split(envelope, m)
	return in, err
}

// MemberOf classifies an envelope: a request (it has "method") is signed in
// params, a response in result or error. An envelope that is none of these,
// or has both result and error, is refused with ErrNotEnvelope.
func MemberOf(envelope []byte) (Member, error) {
	canon, err := canonicalize(envelope)
	if err != nil {
		return 0, err
	}
	return memberOf(canon)
}

// SignEnvelope signs envelope in member m with s and returns the RFC 8785
// canonical form of the envelope with the signature object inserted. An
// envelope whose member already has a signature is refused.
func SignEnvelope(envelope []byte, m Member, s Signer) ([]byte, error) {
	canon, err := canonicalize(envelope)
	if err != nil {
		return nil, err
	}
	input, old, err := split(canon, m)
	if err != nil {
		return nil, err
	}
	if old != nil {
		return nil, fmt.Errorf("sign %s: %s.signature is already present", m, m)
	}
	value, err := s.Sign(input)
	if err != nil {
		return nil, fmt.Errorf("sign %s with key_id %q: %w", m, s.KeyID(), err)
	}
	sigJSON, err := Signature{Algorithm: s.Algorithm(), KeyID: s.KeyID(), Value: value}.MarshalJSON()
	if err != nil {
		return nil, err
	}
	// Append the member at the end of the object and canonicalize again,
	// which puts it in its sorted place.
	_, vs, ve, _ := acs.CanonicalMemberSpan(canon, m.String())
	var b bytes.Buffer
	b.Write(canon[:ve-1])
	if ve-vs > 2 { // the member object is not {}
		b.WriteByte(',')
	}
	b.WriteString(`"signature":`)
	b.Write(sigJSON)
	b.Write(canon[ve-1:])
	return acs.Canonicalize(b.Bytes())
}

// VerifyEnvelope checks the signature of envelope against keys. The member
// comes from MemberOf; sessionID is needed for HMAC-SHA256 keys (responses
// do not carry the session id, so the caller supplies it). It returns the
// verified signature, or an *Error whose Kind says why it failed.
func VerifyEnvelope(envelope []byte, keys *KeySet, sessionID string) (*Signature, error) {
	canon, err := canonicalize(envelope)
	if err != nil {
		return nil, err
	}
	m, err := memberOf(canon)
	if err != nil {
		return nil, err
	}
	input, s, err := split(canon, m)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, &Error{Kind: ErrMissingSignature, Member: m}
	}
	fail := func(kind error, detail string, err error) error {
		return &Error{Kind: kind, Member: m, KeyID: s.KeyID, Algorithm: s.Algorithm, Detail: detail, Err: err}
	}
	k, ok := keys.Get(s.KeyID)
	if !ok {
		return nil, fail(ErrUnknownKey, "", nil)
	}
	if k.Algorithm() != s.Algorithm {
		return nil, fail(ErrAlgorithmMismatch, fmt.Sprintf("the key is %s", k.Algorithm()), nil)
	}
	v, err := k.Verifier(sessionID)
	if err != nil {
		return nil, fail(ErrSessionRequired, "", nil)
	}
	if err := v.Verify(input, s.Value); err != nil {
		return nil, fail(ErrBadSignature, "", unwrapBad(err))
	}
	return s, nil
}

// unwrapBad drops the ErrBadSignature prefix a Verifier puts on its error,
// keeping only its explanation, so an *Error does not say it twice.
func unwrapBad(err error) error {
	msg := strings.TrimPrefix(err.Error(), ErrBadSignature.Error()+": ")
	if msg == ErrBadSignature.Error() {
		return nil
	}
	return errors.New(msg)
}

func canonicalize(envelope []byte) ([]byte, error) {
	canon, err := acs.Canonicalize(envelope)
	if err != nil {
		return nil, &Error{Kind: ErrMalformedEnvelope, Err: err}
	}
	if len(canon) == 0 || canon[0] != '{' {
		return nil, &Error{Kind: ErrNotEnvelope, Detail: "the envelope is not a JSON object"}
	}
	return canon, nil
}

func memberOf(canon []byte) (Member, error) {
	has := func(name string) bool {
		_, _, _, ok := acs.CanonicalMemberSpan(canon, name)
		return ok
	}
	switch res, errm := has("result"), has("error"); {
	case has("method"):
		return Params, nil
	case res && errm:
		return 0, &Error{Kind: ErrNotEnvelope, Detail: "both result and error are present"}
	case res:
		return Result, nil
	case errm:
		return ErrorMember, nil
	}
	return 0, &Error{Kind: ErrNotEnvelope, Detail: "no method, result or error member"}
}

// split works on canonical bytes: it locates m's object and removes its
// signature member textually. In RFC 8785 form, dropping one member and
// one separating comma leaves the canonical form of the smaller object,
// because the other members keep their order and bytes.
func split(canon []byte, m Member) ([]byte, *Signature, error) {
	_, vs, ve, ok := acs.CanonicalMemberSpan(canon, m.String())
	if !ok {
		if err := wellFormed(canon); err != nil {
			return nil, nil, &Error{Kind: ErrMalformedEnvelope, Member: m, Err: err}
		}
		return nil, nil, &Error{Kind: ErrNotEnvelope, Member: m, Detail: fmt.Sprintf("no %s member", m)}
	}
	obj := canon[vs:ve]
	if obj[0] != '{' {
		return nil, nil, &Error{Kind: ErrNotEnvelope, Member: m, Detail: fmt.Sprintf("%s is not an object", m)}
	}
	ps, ss, pe, ok := acs.CanonicalMemberSpan(obj, "signature")
	if !ok {
		if err := wellFormed(obj); err != nil {
			return nil, nil, &Error{Kind: ErrMalformedEnvelope, Member: m, Err: err}
		}
		return canon, nil, nil
	}
	s, err := parseSignature(obj[ss:pe])
	if err != nil {
		return nil, nil, &Error{Kind: ErrMalformedSignature, Member: m, Detail: err.Error()}
	}
	// The pair [ps, pe) goes with the comma before it, unless it is the
	// object's first member; then with the comma after it.
	if obj[ps-1] == ',' {
		ps--
	} else if obj[pe] == ',' {
		pe++
	}
	input := make([]byte, 0, len(canon)-(pe-ps))
	input = append(input, canon[:vs+ps]...)
	input = append(input, canon[vs+pe:]...)
	return input, s, nil
}

// wellFormed says why obj, canonical bytes from acs.Canonicalize, is not a
// well-formed object, or returns nil. The scanner reads canonical input
// without a full parser (no whitespace, one spelling per name), so only
// bytes that did not come from Canonicalize can fail here.
func wellFormed(obj []byte) error {
	if !acs.CanonicalMembers(obj, func(_, _ []byte) bool { return true }) {
		return errors.New("not a canonical JSON object")
	}
	return nil
}

// parseSignature reads a signature object strictly: an object whose
// algorithm, key_id and value members are strings, the algorithm
// registered, the value standard padded base64 of at least one byte.
func parseSignature(raw []byte) (*Signature, error) {
	if raw[0] != '{' {
		return nil, errors.New("not an object")
	}
	// raw is canonical: find the three members without a general decoder.
	str := func(name string) (string, error) {
		v := acs.CanonicalMember(raw, name)
		if v == nil {
			if err := wellFormed(raw); err != nil {
				return "", err
			}
			return "", fmt.Errorf("member %q is missing", name)
		}
		if v[0] != '"' {
			return "", fmt.Errorf("member %q is not a string", name)
		}
		if bytes.IndexByte(v, '\\') < 0 {
			return string(v[1 : len(v)-1]), nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("member %q: %w", name, err)
		}
		return s, nil
	}
	algName, err := str("algorithm")
	if err != nil {
		return nil, err
	}
	keyID, err := str("key_id")
	if err != nil {
		return nil, err
	}
	value, err := str("value")
	if err != nil {
		return nil, err
	}
	alg, err := ParseAlgorithm(algName)
	if err != nil {
		return nil, err
	}
	if keyID == "" {
		return nil, errors.New(`member "key_id" is empty`)
	}
	// Strict: no line breaks (which StdEncoding would skip), canonical
	// padding bits.
	if strings.ContainsAny(value, "\r\n") {
		return nil, errors.New(`member "value" contains a line break`)
	}
	v, err := base64.StdEncoding.Strict().DecodeString(value)
	if err != nil {
		return nil, fmt.Errorf(`member "value" is not standard base64 with padding: %w`, err)
	}
	if len(v) == 0 {
		return nil, errors.New(`member "value" is empty`)
	}
	return &Signature{Algorithm: alg, KeyID: keyID, Value: v}, nil
}
