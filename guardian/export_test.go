package guardian

import "context"

// ServeForTest answers one body as the HTTP transport would.
func ServeForTest(g *Guardian, body []byte) []byte {
	return g.serve(context.Background(), body, "http")
}
