# Package acs.tools handles tools the bundle does not know and calls outside
# the session's Intent.
package acs.tools

import data.acs.call
import data.acs.flow

# A tool the policy knows nothing about is neither allowed nor denied: the
# verdict is not yet reachable (ACS §6, insufficient_context), and if nobody
# resolves it in time it is denied.
findings contains {
	"disposition": "defer",
	"rule_id": "tools.unknown_tool",
	"reason_codes": ["unknown_tool"],
	"reasoning": sprintf("the policy does not know the tool %s", [call.name]),
	"policy_data": {"tools": {"unknown": call.name}},
	"defer_details": {
		"reason": "insufficient_context",
		"resolution_method": data.guardian.unknown_tool.resolution_method,
		"resolution_timeout_ms": data.guardian.unknown_tool.resolution_timeout_ms,
		"timeout_decision": "deny",
	},
} if {
	call.is_tool_call
	not data.guardian.tools[call.name]
}

# IBAC (ACS §8.4, §9.1): a capability outside Intent.parsed, and not granted
# for this request, needs an approver's intent_extension.
findings contains {
	"disposition": "ask",
	"rule_id": "tools.intent_mismatch",
	"reason_codes": ["ibac_intent_mismatch"],
	"reasoning": sprintf("capability %s is not in the session's Intent", [call.capability]),
	"policy_data": {"ibac": {"requested_capability": call.capability, "intent": input.intent.parsed}},
	"ask_details": {
		"approver": flow.approver,
		"prompt": sprintf("Extend the session's Intent with %s for tool %s?", [call.capability, call.name]),
		"requested_capabilities": [call.capability],
	},
} if {
	out_of_intent
	flow.approver
}

findings contains {
	"disposition": "deny",
	"rule_id": "tools.intent_mismatch.approver_unavailable",
	"reason_codes": ["ibac_intent_mismatch", "approver_unavailable"],
	"reasoning": sprintf("capability %s is not in the session's Intent and this client cannot route an ASK to extend it", [call.capability]),
	"policy_data": {"ibac": {"requested_capability": call.capability, "intent": input.intent.parsed}},
} if {
	out_of_intent
	not flow.approver
}

out_of_intent if {
	call.is_tool_call
	is_array(input.intent.parsed)
	is_string(call.capability)
	not call.capability in input.intent.parsed
	not call.capability in object.get(input, "grants", [])
}
