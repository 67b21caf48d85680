package verify

import (
	"bytes"
	"encoding/json"
)

// These read values out of JSON in RFC 8785 form, the output of
// acs.Canonicalize or acs.ParseEntry's Content, which has already been
// parsed strictly: a member name has one spelling, there is no whitespace,
// and a value ends at its closing quote or bracket, or at the next
// delimiter. They never fail on such input; on anything else they report
// the value absent rather than guess.

// canonicalMember returns the value of member name of obj, a canonical
// object, or nil when obj is not an object or has no such member.
func canonicalMember(obj []byte, name string) []byte {
	var value []byte
	canonicalMembers(obj, func(key, v []byte) bool {
		if string(key) == name {
			value = v
			return false
		}
		return true
	})
	return value
}

// canonicalMembers calls f with each member of obj, a canonical object:
// its name as written between the quotes, and its value, until f returns
// false. It reports false when obj is not an object.
func canonicalMembers(obj []byte, f func(key, value []byte) bool) bool {
	if len(obj) < 2 || obj[0] != '{' {
		return false
	}
	for i := 1; i < len(obj) && obj[i] != '}'; {
		if obj[i] == ',' {
			i++
		}
		keyEnd := skipCanonical(obj, i)
		if keyEnd < i+2 || keyEnd >= len(obj) || obj[keyEnd] != ':' {
			return false
		}
		end := skipCanonical(obj, keyEnd+1)
		if end < 0 {
			return false
		}
		if !f(obj[i+1:keyEnd-1], obj[keyEnd+1:end]) {
			return true
		}
		i = end
	}
	return true
}

// canonicalElements calls f with each element of arr, a canonical array.
// It reports false when arr is not an array.
func canonicalElements(arr []byte, f func(elem []byte)) bool {
	if len(arr) < 2 || arr[0] != '[' {
		return false
	}
	for i := 1; i < len(arr) && arr[i] != ']'; {
		if arr[i] == ',' {
			i++
		}
		end := skipCanonical(arr, i)
		if end < 0 {
			return false
		}
		f(arr[i:end])
		i = end
	}
	return true
}

// skipCanonical returns the end of the canonical value starting at b[i],
// or -1 if it does not end within b.
func skipCanonical(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			if j = closingQuote(b, j+1); j < 0 {
				return -1
			}
			if depth == 0 {
				return j + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j // the end of a number or literal
			}
			if depth--; depth == 0 {
				return j + 1
			}
		case ',', ':':
			if depth == 0 {
				return j
			}
		}
	}
	if depth == 0 {
		return len(b)
	}
	return -1
}

// canonicalString decodes v if it is a canonical JSON string.
func canonicalString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}
