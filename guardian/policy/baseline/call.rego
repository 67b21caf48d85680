# Package acs.call is the baseline's view of a tool call, the same for the
# native hook (steps/toolCallRequest) and wrapped MCP (protocols/MCP/tools/call).
package acs.call

# is_tool_call is true for the methods the tool rules apply to.
is_tool_call if input.method == "steps/toolCallRequest"

is_tool_call if input.method == "protocols/MCP/tools/call"

name := input.params.payload.tool.name if input.method == "steps/toolCallRequest"

name := input.params.params.name if input.method == "protocols/MCP/tools/call"

capability := input.params.payload.capability if input.method == "steps/toolCallRequest"

# args maps an argument name to its value and its provenance (ACS §7), or
# null.
args[k] := native_arg(a) if {
	input.method == "steps/toolCallRequest"
	some k, a in input.params.payload.arguments
}

# A native argument that is not {value, provenance} is taken as a bare value.
native_arg(a) := {"value": v, "provenance": object.get(a, "provenance", null)} if {
	is_object(a)
	v := a.value
} else := {"value": a, "provenance": null}

args[k] := {
	"value": v,
	"provenance": null,
} if {
	input.method == "protocols/MCP/tools/call"
	some k, v in input.params.params.arguments
}

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
