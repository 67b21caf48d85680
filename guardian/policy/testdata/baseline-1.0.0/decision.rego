# Package acs holds the baseline bundle's decision rule. Each rule package
# contributes findings; the strictest disposition among them wins (deny, ask,
# defer, modify, then allow), and the decision cites every rule that reached
# that disposition.
package acs

import data.acs.flow
import data.acs.secrets
import data.acs.shell
import data.acs.tools

findings := ((shell.findings | secrets.findings) | flow.findings) | tools.findings

strictness := {"deny": 4, "ask": 3, "defer": 2, "modify": 1}

winner := d if {
	top := max({strictness[f.disposition] | some f in findings})
	some d, s in strictness
	s == top
}

fired := [f | some f in findings; f.disposition == winner]

default decision := {
	"decision": "allow",
	"reasoning": "no baseline rule objects to this step",
	"rule_ids": ["baseline.default_allow"],
}

decision := object.union_n([common, cited, data_of, details[winner]]) if winner

common := {
	"decision": winner,
	"reasoning": concat("; ", {f.reasoning | some f in fired}),
	"reason_codes": sort({c | some f in fired; some c in f.reason_codes}),
	"rule_ids": sort({f.rule_id | some f in fired}),
}

cited := {"cited_provenance_ids": ids} if {
	ids := sort({id | some f in fired; some id in object.get(f, "cited_provenance_ids", [])})
	count(ids) > 0
} else := {}

data_of := {"policy_data": object.union_n([f.policy_data | some f in fired; f.policy_data])} if {
	some f in fired
	f.policy_data
} else := {}

details["deny"] := {}

details["modify"] := {"modifications": {"redactions": sort(secrets.redactions)}}

# One approver or one deferral per decision: the first fired finding's, in
# the set's deterministic order.
details["ask"] := {"ask_details": fired[0].ask_details}

details["defer"] := {"defer_details": fired[0].defer_details}
