# Package acs.flow stops data from untrusted channels from steering
# consequential tools (ACS §7): such a call is asked of an approver, or
# denied when the client has no way to route an ASK (ACS §9.2).
package acs.flow

import data.acs.call

# ACS §7.2 default channel-to-trust mapping. agent_generated data takes the
# minimum trust of its derived_from lineage (ACS §7.1 monotonicity).
default_trust := {
	"user_input": "trusted",
	"system": "trusted",
	"tool_output": "untrusted",
	"retrieved": "untrusted",
	"a2a_inbound": "untrusted",
	"external": "untrusted",
}

# nodes are every provenance object the policy can see: the session's and
# the call's own.
nodes := object.union(input.provenance, {p.provenance_id: p |
	some a in call.args
	p := a.provenance
	is_object(p)
})

edges[id] := object.get(p, "derived_from", []) if some id, p in nodes

# Trust is derived from origin + source_id against local policy (ACS §7.1):
# the bundle's data may name sources it trusts within an untrusted origin.
# A trust label on the wire is a hint that can only lower trust.
trusted_node(p) if {
	default_trust[p.origin] == "trusted"
	not p.trust == "untrusted"
}

trusted_node(p) if {
	p.source_id in object.get(data.guardian.trusted_sources, p.origin, [])
	not p.trust == "untrusted"
}

# untrusted_sources(id) are the ids in id's lineage that make it untrusted:
# untrusted nodes, and ids the Guardian has never seen (unknown lineage
# fails closed). agent_generated nodes take their trust from their lineage.
untrusted_sources(id) := {n | some n in reach; untrusted_node(n)} | {d |
	some n in reach
	some d in edges[n]
	not nodes[d]
} if {
	reach := graph.reachable(edges, {id})
}

untrusted_node(n) if {
	p := nodes[n]
	p.origin != "agent_generated"
	not trusted_node(p)
}

untrusted_node(n) if {
	p := nodes[n]
	p.origin == "agent_generated"
	p.trust == "untrusted"
}

consequential if data.guardian.tools[call.name].consequential

consequential if call.capability in data.guardian.consequential_capabilities

# tainted maps each argument whose value derives from an untrusted source to
# those sources.
tainted[k] := srcs if {
	some k, a in call.args
	is_object(a.provenance)
	not plainly_trusted(a.provenance.provenance_id)
	srcs := untrusted_sources(a.provenance.provenance_id)
	count(srcs) > 0
}

# plainly_trusted(id) holds for a trusted node with no lineage, the common
# case (user input), whose untrusted_sources are empty without walking the
# graph.
plainly_trusted(id) if {
	p := nodes[id]
	p.origin != "agent_generated"
	trusted_node(p)
	count(object.get(p, "derived_from", [])) == 0
}

tainted_args := sort(object.keys(tainted))

cited := sort({id | some k, srcs in tainted; some id in srcs} | {call.args[k].provenance.provenance_id | some k, _ in tainted})

origins := sort({nodes[id].origin | some _, srcs in tainted; some id in srcs; nodes[id]})

# findings are the flagged calls, looked for only when a consequential
# tool has a tainted argument: most calls carry trusted data and stop here.
findings := flagged if {
	count(tainted) > 0
	call.is_tool_call
	consequential
}

else := set()

# approver is who an ASK goes to, undefined when the client cannot route an
# ASK: the Guardian says so (session.approver_capable), or the bundle's data
# lists the agent (ACS §9.2 leaves the means to the deployment).
approver := a if {
	not input.session.approver_capable == false
	not input.session.agent_id in data.guardian.approver_incapable_agents
	a := object.get(data.guardian.approvers, input.session.agent_id, data.guardian.approvers["*"])
}

flagged contains {
	"disposition": "ask",
	"rule_id": "flow.untrusted_into_consequential",
	"reason_codes": ["untrusted_into_consequential"],
	"reasoning": reasoning,
	"cited_provenance_ids": cited,
	"policy_data": {"fides": {"tool": call.name, "tainted_arguments": tainted_args, "untrusted_origins": origins}},
	"ask_details": {
		"approver": approver,
		"prompt": sprintf("Allow %s with arguments %s that came from untrusted data?", [call.name, concat(", ", tainted_args)]),
	},
} if {
	call.is_tool_call
	consequential
	count(tainted) > 0
}

# ACS §9.2: a client that cannot route an ASK must not receive one; the
# action is outside its reachable authority, so it is denied, naming the
# missing capability.
flagged contains {
	"disposition": "deny",
	"rule_id": "flow.untrusted_into_consequential.approver_unavailable",
	"reason_codes": ["untrusted_into_consequential", "approver_unavailable"],
	"reasoning": concat("", [reasoning, "; this client cannot route an ASK to an approver, so it is denied"]),
	"cited_provenance_ids": cited,
	"policy_data": {"fides": {"tool": call.name, "tainted_arguments": tainted_args, "untrusted_origins": origins}},
} if {
	call.is_tool_call
	consequential
	count(tainted) > 0
	not approver
}

reasoning := sprintf("consequential tool %s would receive %s derived from untrusted data (%s)", [
	call.name,
	concat(", ", tainted_args),
	concat(", ", origins),
])
