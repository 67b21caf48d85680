package policy

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/open-policy-agent/opa/v1/util"
)

// encodeNDCache serializes the non-deterministic built-in cache of one
// evaluation as
//
//	{"<builtin>": [[[<arg>, ...], <result>], ...], ...}
//
// with each built-in's calls sorted by their arguments. OPA's own JSON form
// of the cache (NDBCache.MarshalJSON) turns the argument arrays into
// strings, which its UnmarshalJSON does not turn back, so a cache read back
// from it never hits; this form round-trips. Integers keep all their digits
// (time.now_ns exceeds 2^53), so the bytes must be stored as they are, not
// re-encoded through float64.
func encodeNDCache(c builtins.NDBCache) ([]byte, error) {
	if len(c) == 0 {
		// Most decisions call no non-deterministic built-in: skip the
		// map and the encoder for the bytes json.Marshal would produce.
		return []byte("{}"), nil
	}
	out := make(map[string][][2]any, len(c))
	for name, calls := range c {
		keys := calls.Keys()
		slices.SortFunc(keys, func(a, b *ast.Term) int { return a.Value.Compare(b.Value) })
		pairs := make([][2]any, 0, len(keys))
		for _, k := range keys {
			args, err := ast.JSON(k.Value)
			if err != nil {
				return nil, err
			}
			res, err := ast.JSON(calls.Get(k).Value)
			if err != nil {
				return nil, err
			}
			pairs = append(pairs, [2]any{args, res})
		}
		out[name] = pairs
	}
	return json.Marshal(out)
}

// decodeNDCache reads encodeNDCache's form back.
func decodeNDCache(raw []byte) (builtins.NDBCache, error) {
	c := builtins.NDBCache{}
	if len(raw) == 0 {
		return c, nil
	}
	var doc map[string][]any
	if err := util.UnmarshalJSON(raw, &doc); err != nil {
		return nil, fmt.Errorf("not an object of built-in call lists: %v", err)
	}
	for name, calls := range doc {
		for i, call := range calls {
			pair, ok := call.([]any)
			if !ok || len(pair) != 2 {
				return nil, fmt.Errorf("%s[%d] is not an [arguments, result] pair", name, i)
			}
			if _, ok := pair[0].([]any); !ok {
				return nil, fmt.Errorf("%s[%d]: the arguments are not an array", name, i)
			}
			args, err := ast.InterfaceToValue(pair[0])
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %v", name, i, err)
			}
			res, err := ast.InterfaceToValue(pair[1])
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %v", name, i, err)
			}
			c.Put(name, args, res)
		}
	}
	return c, nil
}
