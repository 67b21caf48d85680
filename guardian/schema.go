package guardian

import (
	"encoding/json"

	"github.com/acsledger/acsledger/acs/rpcerr"
)

// validateRequest checks a request against request-envelope.json (a
// violation outside params is -32600, inside params -32602) and its
// method's payload schema (-32602), naming the failing location.
//
// TODO(guardian): wire acs/schemas here once it lands; until then only the
// structural checks of parse and readParams apply.
func validateRequest(raw []byte, method string, payload json.RawMessage) *rpcerr.Error {
	return nil
}
