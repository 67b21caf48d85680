# Package acs.call is the baseline's view of a tool call, the same for the
# native hook (steps/toolCallRequest) and wrapped MCP (protocols/MCP/tools/call).
package acs.call

# is_tool_call is true for the methods the tool rules apply to.
is_tool_call if input.method == "steps/toolCallRequest"

is_tool_call if input.method == "protocols/MCP/tools/call"

name := input.params.payload.tool.name if input.method == "steps/toolCallRequest"

name := input.params.params.name if input.method == "protocols/MCP/tools/call"

capability := input.params.payload.capability if input.method == "steps/toolCallRequest"

# args maps an argument name to its value, the JSON pointer (RFC 6901) of the
# value inside the request params, and its provenance (ACS §7), or null.
args[k] := {
	"value": a.value,
	"pointer": concat("", ["/payload/arguments/", escape(k), "/value"]),
	"provenance": object.get(a, "provenance", null),
} if {
	input.method == "steps/toolCallRequest"
	some k, a in input.params.payload.arguments
	is_object(a)
	"value" in object.keys(a)
}

# A native argument that is not {value, provenance} is taken as a bare value.
args[k] := {
	"value": a,
	"pointer": concat("", ["/payload/arguments/", escape(k)]),
	"provenance": null,
} if {
	input.method == "steps/toolCallRequest"
	some k, a in input.params.payload.arguments
	not bare_object_with_value(a)
}

args[k] := {
	"value": v,
	"pointer": concat("", ["/params/arguments/", escape(k)]),
	"provenance": null,
} if {
	input.method == "protocols/MCP/tools/call"
	some k, v in input.params.params.arguments
}

bare_object_with_value(a) if {
	is_object(a)
	"value" in object.keys(a)
}

# escape makes s one JSON pointer reference token (RFC 6901 §3).
escape(s) := replace(replace(s, "~", "~0"), "/", "~1")

# commands are the shell command lines the call would run: raw_command, the
# string arguments conventionally holding a command, and every top-level
# string argument of a tool the bundle marks as a shell.
commands contains input.params.payload.raw_command if {
	input.method == "steps/toolCallRequest"
	is_string(input.params.payload.raw_command)
}

commands contains a.value if {
	some k, a in args
	k in data.guardian.command_arguments
	is_string(a.value)
}

commands contains a.value if {
	data.guardian.tools[name].shell
	some a in args
	is_string(a.value)
}

# A list-form command (["rm", "-rf", "/"]) is checked as its joined words.
commands contains concat(" ", a.value) if {
	some k, a in args
	k in data.guardian.command_arguments
	is_array(a.value)
	every w in a.value {
		is_string(w)
	}
}
