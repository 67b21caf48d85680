package acs

import "bytes"

// CanonicalMember, CanonicalMembers and CanonicalElements read values out of
// JSON in RFC 8785 form, the output of [Canonicalize] or an [Entry]'s
// Content, without decoding it: the Guardian cuts a request's params out of
// its canonical body with them, and the verifier reads entries and
// responses. Such input was parsed strictly: a member name has one
// spelling, there is no whitespace, and a value ends at its closing quote or
// bracket or, for a number or literal, at the next ',', ']', '}' or ':'.
// They never fail on such input. On anything else they stop at the first
// byte that is not where canonical JSON would have it and report the value
// absent, rather than guess: a value position that holds no value (`{"a":}`,
// `{"a":,"b":1}`) is malformed, not an empty value.

// CanonicalMember returns the value of the top-level member name of obj, a
// canonical object, or nil when obj is not one or has no such member before
// the first malformed byte.
func CanonicalMember(obj []byte, name string) []byte {
	var value []byte
	CanonicalMembers(obj, func(key, v []byte) bool {
		// A member name in RFC 8785 form has one spelling, so comparing
		// the bytes between the quotes compares names that need no
		// escape, which every name acsledger looks up is.
		if string(key) == name {
			value = v
			return false
		}
		return true
	})
	return value
}

// CanonicalMembers calls f with each top-level member of obj, a canonical
// object: its name as written between the quotes, and its value, until f
// returns false. It reports whether obj is an object, well formed up to
// where f stopped (or to its end).
func CanonicalMembers(obj []byte, f func(name, value []byte) bool) bool {
	if len(obj) < 2 || obj[0] != '{' {
		return false
	}
	if obj[1] == '}' {
		return len(obj) == 2
	}
	for i := 1; ; {
		if obj[i] != '"' {
			return false
		}
		keyEnd := skipValue(obj, i)
		if keyEnd < 0 || keyEnd >= len(obj) || obj[keyEnd] != ':' {
			return false
		}
		end := skipValue(obj, keyEnd+1)
		if end < 0 || end >= len(obj) {
			return false
		}
		if !f(obj[i+1:keyEnd-1], obj[keyEnd+1:end]) {
			return true
		}
		switch obj[end] {
		case ',':
			i = end + 1
			if i >= len(obj) {
				return false
			}
		case '}':
			return end == len(obj)-1
		default:
			return false
		}
	}
}

// CanonicalElements calls f with each element of arr, a canonical array. It
// reports whether arr is a well-formed array; f may have been called for
// the elements before the first malformed byte.
func CanonicalElements(arr []byte, f func(elem []byte)) bool {
	if len(arr) < 2 || arr[0] != '[' {
		return false
	}
	if arr[1] == ']' {
		return len(arr) == 2
	}
	for i := 1; ; {
		end := skipValue(arr, i)
		if end < 0 || end >= len(arr) {
			return false
		}
		f(arr[i:end])
		switch arr[end] {
		case ',':
			i = end + 1
		case ']':
			return end == len(arr)-1
		default:
			return false
		}
	}
}

// skipValue returns the index just past the canonical value starting at
// b[i], or -1 when no value starts there or it does not end within b. A
// closing bracket, ',' or ':' where a value should start is no value.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		if j := closingQuote(b, i+1); j >= 0 {
			return j + 1
		}
		return -1
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				if j = closingQuote(b, j+1); j < 0 {
					return -1
				}
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	case '}', ']', ',', ':':
		return -1
	}
	// A number, true, false or null ends at the next delimiter.
	j := i + 1
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ':' {
		j++
	}
	return j
}

// closingQuote returns the index of the first unescaped '"' in b at or
// after i, which follows an opening quote, or -1 if there is none.
func closingQuote(b []byte, i int) int {
	for {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return -1
		}
		q := i + k
		backslashes := 0
		for p := q - 1; b[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q
		}
		i = q + 1
	}
}
