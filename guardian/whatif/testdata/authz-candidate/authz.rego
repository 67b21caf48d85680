# The candidate of the OPA test: the recorded policy allowed every read
# and delete; this one allows reads only.
package authz

default allow := false

allow if input.action == "read"
