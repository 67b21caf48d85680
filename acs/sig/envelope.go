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
	_, _, vs, ve, _, err := findMember(canon, m.String())
	if err != nil {
		return nil, err
	}
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
		_, _, _, _, ok, err := findMember(canon, name)
		return err == nil && ok
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
	_, _, vs, ve, ok, err := findMember(canon, m.String())
	if err != nil {
		return nil, nil, &Error{Kind: ErrMalformedEnvelope, Member: m, Err: err}
	}
	if !ok {
		return nil, nil, &Error{Kind: ErrNotEnvelope, Member: m, Detail: fmt.Sprintf("no %s member", m)}
	}
	obj := canon[vs:ve]
	if obj[0] != '{' {
		return nil, nil, &Error{Kind: ErrNotEnvelope, Member: m, Detail: fmt.Sprintf("%s is not an object", m)}
	}
	ps, pe, ss, se, ok, err := findMember(obj, "signature")
	if err != nil {
		return nil, nil, &Error{Kind: ErrMalformedEnvelope, Member: m, Err: err}
	}
	if !ok {
		return canon, nil, nil
	}
	s, err := parseSignature(obj[ss:se])
	if err != nil {
		return nil, nil, &Error{Kind: ErrMalformedSignature, Member: m, Detail: err.Error()}
	}
	// The pair [ps, pe) starts with its leading comma unless it is the
	// object's first member; then it takes the comma after it instead.
	if obj[ps] != ',' && obj[pe] == ',' {
		pe++
	}
	input := make([]byte, 0, len(canon)-(pe-ps))
	input = append(input, canon[:vs+ps]...)
	input = append(input, canon[vs+pe:]...)
	return input, s, nil
}

// findMember looks up member name in obj, a JSON object in RFC 8785 form
// (the output of acs.Canonicalize, or a value inside it). It returns the
// span of the member's pair, [pairStart, pairEnd), including the comma
// before it if any, and of its value, [valStart, valEnd).
//
// Because the input is canonical, a member name has exactly one spelling,
// so names compare as bytes, and values can be skipped without a full
// parser: there is no whitespace, and brackets only need counting outside
// strings.
func findMember(obj []byte, name string) (pairStart, pairEnd, valStart, valEnd int, ok bool, err error) {
	if len(obj) < 2 || obj[0] != '{' {
		return 0, 0, 0, 0, false, errors.New("not an object")
	}
	i := 1
	for i < len(obj) && obj[i] != '}' {
		pair := i
		if obj[i] == ',' {
			i++
		}
		keyEnd, err := skipValue(obj, i)
		if err != nil {
			return 0, 0, 0, 0, false, err
		}
		if keyEnd >= len(obj) || obj[keyEnd] != ':' {
			return 0, 0, 0, 0, false, fmt.Errorf("no ':' after member name at byte %d", i)
		}
		vs := keyEnd + 1
		ve, err := skipValue(obj, vs)
		if err != nil {
			return 0, 0, 0, 0, false, err
		}
		key := obj[i:keyEnd]
		if len(key) == len(name)+2 && string(key[1:len(key)-1]) == name {
			return pair, ve, vs, ve, true, nil
		}
		i = ve
	}
	if i >= len(obj) {
		return 0, 0, 0, 0, false, errors.New("unterminated object")
	}
	return 0, 0, 0, 0, false, nil
}

// skipValue returns the end of the canonical JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("value expected at end of input")
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unterminated value at byte %d", i)
	}
	// A number or a literal runs to the next delimiter.
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ':' {
		j++
	}
	if j == i {
		return 0, fmt.Errorf("value expected at byte %d", i)
	}
	return j, nil
}

func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at byte %d", i)
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
		_, _, vs, ve, ok, err := findMember(raw, name)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", fmt.Errorf("member %q is missing", name)
		}
		v := raw[vs:ve]
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
