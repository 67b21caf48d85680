package guardian

import (
	"fmt"
	"slices"
	"strings"
)

// The method table of ACS §5.

type methodKind int

const (
	kindStep methodKind = iota // chained: steps/*, MCP, agbom/*
	kindHello
	kindPing
	kindReceipt // MethodReceipt: acsledger's, not a hook
)

type methodSpec struct {
	kind methodKind
	// mcpVersion is the pinned version of a wrapped:mcp-<version>/... method.
	mcpVersion string
}

// Steps are the native hooks of ACS §5, in the order of its table: the
// seed's sixteen and the skill lifecycle hooks of the current text.
var Steps = []string{
	"steps/sessionStart",
	"steps/agentTrigger",
	"steps/turnStart",
	"steps/userMessage",
	"steps/agentResponse",
	"steps/knowledgeRetrieval",
	"steps/memoryContextRetrieval",
	"steps/memoryStore",
	"steps/toolCallRequest",
	"steps/toolCallResult",
	"steps/preCompact",
	"steps/postCompact",
	"steps/subagentStart",
	"steps/subagentStop",
	MethodSkillRegister,
	MethodSkillLoad,
	MethodSkillUnload,
	"steps/turnEnd",
	MethodSessionEnd,
}

// Method names outside steps/*.
const (
	MethodHello         = "handshake/hello"
	MethodPing          = "system/ping"
	MethodSessionEnd    = "steps/sessionEnd"
	MethodAgbomSnapshot = "agbom/snapshot"
	MethodAgbomChanged  = "agbom/changed"
	mcpPrefix           = "protocols/MCP/"
	wrappedMCPPrefix    = "wrapped:mcp-"
)

// lookupMethod returns how a method is handled, or false if the Guardian
// does not implement it.
func lookupMethod(m string) (methodSpec, bool) {
	switch {
	case m == MethodHello:
		return methodSpec{kind: kindHello}, true
	case m == MethodPing:
		return methodSpec{kind: kindPing}, true
	case m == MethodReceipt:
		return methodSpec{kind: kindReceipt}, true
	case m == MethodAgbomSnapshot, m == MethodAgbomChanged, slices.Contains(Steps, m):
		return methodSpec{kind: kindStep}, true
	case strings.HasPrefix(m, mcpPrefix) && len(m) > len(mcpPrefix):
		return methodSpec{kind: kindStep}, true
	case strings.HasPrefix(m, wrappedMCPPrefix):
		// wrapped:mcp-<version>/<mcp method>, ACS §3.
		version, rest, ok := strings.Cut(m[len(wrappedMCPPrefix):], "/")
		if !ok || version == "" || rest == "" {
			return methodSpec{}, false
		}
		return methodSpec{kind: kindStep, mcpVersion: version}, true
	}
	return methodSpec{}, false
}

func methodNotFoundMessage(m string) string {
	switch {
	case strings.HasPrefix(m, "protocols/A2A/"), strings.HasPrefix(m, "wrapped:a2a-"):
		return fmt.Sprintf("method %q: A2A wrapping is reserved and deferred to ACS v0.2 (§5)", m)
	case strings.HasPrefix(m, "trace/"):
		return fmt.Sprintf("method %q: the trace/* namespace is reserved and defines no methods in ACS v0.1", m)
	case strings.HasPrefix(m, wrappedMCPPrefix):
		return fmt.Sprintf("method %q: the wrapped form is wrapped:mcp-<version>/<method>", m)
	}
	return fmt.Sprintf("method %q does not exist in ACS v0.1", m)
}

// implemented reports whether the client's methods_implemented covers m:
// an exact name, or a "prefix/*" entry.
func implemented(list []string, m string) bool {
	for _, l := range list {
		if l == m {
			return true
		}
		if p, ok := strings.CutSuffix(l, "*"); ok && strings.HasSuffix(p, "/") && strings.HasPrefix(m, p) {
			return true
		}
	}
	return false
}
