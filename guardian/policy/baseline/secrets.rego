# Package acs.secrets redacts credentials from what a step carries: tool
# arguments, raw commands, messages and results. A secret inside a longer
# string is masked in place, so a command keeps working shape
# ("curl -H 'Authorization: Bearer [REDACTED]' ...").
package acs.secrets

# patterns each have exactly two capture groups: text kept before the secret
# and text kept after it (either may be empty), so that all of them can be
# joined into one regular expression and replaced in one pass.
patterns := [
	{"kind": "aws_access_key_id", "re": `()\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b()`},
	{"kind": "aws_secret_access_key", "re": `((?i:aws_?secret_?access_?key|aws_?secret)["']?\s*[:=]\s*["']?)[A-Za-z0-9/+]{40}()`},
	{"kind": "github_token", "re": `()\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b()`},
	{"kind": "github_token", "re": `()\bgithub_pat_[A-Za-z0-9_]{22,255}\b()`},
	{"kind": "private_key", "re": `()-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)()`},
	{"kind": "bearer_token", "re": `((?i:\bbearer)\s+)[A-Za-z0-9\-._~+/]{16,}=*()`},
	{"kind": "url_password", "re": `(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]+:)[^/\s@]+(@)`},
	{"kind": "slack_token", "re": `()\bxox[abposr]-[A-Za-z0-9-]{10,}()`},
	{"kind": "stripe_secret_key", "re": `()\b[sr]k_live_[A-Za-z0-9]{20,}()`},
	{"kind": "google_api_key", "re": `()\bAIza[0-9A-Za-z_\-]{35}()`},
]

# all_patterns is every pattern in one alternation, each wrapped as
# (?:re), in the order of patterns; replacement keeps every pattern's
# "before" group, then the mark, then its "after" group (only the groups of
# the alternative that matched are non-empty). Both are written out rather
# than built with concat and sprintf, which would run on every decision;
# TestBaselineDerivedConstants checks them against patterns.
all_patterns := `(?:()\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b())|(?:((?i:aws_?secret_?access_?key|aws_?secret)["']?\s*[:=]\s*["']?)[A-Za-z0-9/+]{40}())|(?:()\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b())|(?:()\bgithub_pat_[A-Za-z0-9_]{22,255}\b())|(?:()-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)())|(?:((?i:\bbearer)\s+)[A-Za-z0-9\-._~+/]{16,}=*())|(?:(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]+:)[^/\s@]+(@))|(?:()\bxox[abposr]-[A-Za-z0-9-]{10,}())|(?:()\b[sr]k_live_[A-Za-z0-9]{20,}())|(?:()\bAIza[0-9A-Za-z_\-]{35}())`

replacement := "${1}${3}${5}${7}${9}${11}${13}${15}${17}${19}[REDACTED]${2}${4}${6}${8}${10}${12}${14}${16}${18}${20}"

# scope is the part of the params a step's content lives in, and prefix
# the JSON pointer of that part.
scope := input.params.payload if startswith(input.method, "steps/")

scope := input.params.params if startswith(input.method, "protocols/MCP/")

prefix := "/payload" if startswith(input.method, "steps/")

prefix := "/params" if startswith(input.method, "protocols/MCP/")

# hits are the strings in scope that match some secret pattern. Walking
# without paths is cheap, so the common step, which carries no secret,
# never builds a path.
hits := {value |
	walk(scope, [_, value])
	is_string(value)
	regex.match(all_patterns, value)
}

# suspects maps the JSON pointer of every string in scope that matches some
# secret pattern to the string. Provenance objects are facts about the
# data, not the data, and are left alone.
suspects[ptr] := value if {
	count(hits) > 0
	walk(scope, [path, value])
	value in hits
	not "provenance" in path
	ptr := concat("", [prefix, concat("", [concat("", ["/", escape(sprintf("%v", [seg]))]) | some seg in path])])
}

escape(s) := replace(replace(s, "~", "~0"), "/", "~1") if contains(s, "~")

else := replace(s, "/", "~1") if contains(s, "/")

else := s

# leaks maps the pointer of every string that carries a secret to the kinds
# of secret it carries.
leaks[ptr] := {p.kind | some p in patterns; regex.match(p.re, value)} if some ptr, value in suspects

redactions contains {"path": ptr, "replacement": regex.replace(suspects[ptr], all_patterns, replacement)} if {
	some ptr, _ in leaks
}

# findings are the secrets found, looked for only when some string in scope
# matched: most steps carry none and stop here.
findings := found if count(hits) > 0

else := set()

labels := {
	"aws_access_key_id": "an AWS access key id",
	"aws_secret_access_key": "an AWS secret access key",
	"github_token": "a GitHub token",
	"private_key": "a private key",
	"bearer_token": "a bearer token",
	"url_password": "a password in a URL",
	"slack_token": "a Slack token",
	"stripe_secret_key": "a Stripe secret key",
	"google_api_key": "a Google API key",
}

found contains {
	"disposition": "modify",
	"rule_id": concat(".", ["secrets", kind]),
	"reason_codes": ["secret_detected"],
	"reasoning": sprintf("%s was redacted from %s", [labels[kind], concat(", ", ptrs)]),
	"policy_data": {"secrets": {kind: ptrs}},
} if {
	some kind in {k | some ks in leaks; some k in ks}
	ptrs := sort({ptr | some ptr, ks in leaks; kind in ks})
}
