# Package acs.shell denies shell commands that destroy a machine, its data or
# shared history. Commands are normalized first so that quoting, escaping,
# repeated blanks, $IFS and absolute paths to a binary do not slip past.
package acs.shell

import data.acs.call

# normalized are the call's command lines with quotes and backslashes
# removed, $IFS and line continuations read as blanks, and runs of blanks
# collapsed to one space.
normalized contains n if {
	some c in call.commands
	n := normalize(c)
}

normalize(c) := n if {
	a := regex.replace(c, `\\\r?\n`, " ")
	b := regex.replace(a, `\$\{IFS\}|\$IFS\b`, " ")
	d := regex.replace(b, `["'\\]`, "")
	n := trim_space(regex.replace(d, `[ \t\r\n]+`, " "))
}

# suspicious are the normalized command lines that mention anything a rule
# below looks for; the others (ls, npm test, go build ...) skip the
# analysis.
suspicious contains line if {
	some line in normalized
	regex.match(trigger, line)
}

trigger := `(?i)\b(?:rm|rmdir|shred|srm|find|mkfs|mke2fs|mkswap|wipefs|newfs|format|diskutil|dd|tee|cp|install|blkdiscard|chmod|chown|chgrp|setfacl|git|curl|wget|fetch|aria2c|https?|xh|iwr|irm|invoke-webrequest|invoke-restmethod|iex|invoke-expression|function)\b|/dev/|\(\s*\)|%0`

# invocations are the simple commands of every command line: the first word
# of each segment after any wrappers (sudo -u root, env A=b, nohup, timeout
# 10, xargs -0, sh -c, ...), with the words after it.
invocations contains {"cmd": regex.replace(ws[0], `^.*/`, ""), "args": array.slice(ws, 1, count(ws))} if {
	some line in suspicious
	some seg in regex.split(`\s*(?:;|&&|\|\||\||&|\$\(|<\(|\x60|\(|\)|\bthen\b|\bdo\b|\belse\b)\s*`, line)
	ws := [w | some w in split(regex.replace(seg, wrappers, ""), " "); w != ""]
	count(ws) > 0
}

# wrappers matches the words before a command that run it rather than being
# it: wrapper commands, their options (with the value of the options that
# take one), variable assignments and durations.
wrappers := concat("", [
	`^\s*(?:(?:`,
	`(?:\S*/)?(?:sudo|doas|env|nohup|time|nice|ionice|command|exec|builtin|xargs|timeout|stdbuf|busybox|`,
	`sh|bash|zsh|dash|ksh|eval|watch|setsid|unbuffer|\{|!)`,
	`|chroot\s+\S+`,
	`|-[ugUCsnph]\s+\S+`,
	`|-\S*`,
	`|[A-Za-z_][A-Za-z0-9_]*=\S*`,
	`|[0-9]+[smhd]?`,
	`)(?:\s+|$))*`,
])

critical_paths := {p | some p in data.guardian.shell.critical_paths}

# critical(t) holds for a path argument that names the root, a home
# directory or a system directory, however written: /etc/, //etc, /etc/*,
# /etc/. and ~/ all count.
critical(t) if {
	a := regex.replace(t, `/+`, "/")
	b := regex.replace(a, `(?:/\.|/\*)+$`, "/")
	c := trim_right(b, "/")
	path_key(b, c) in critical_paths
}

path_key(b, "") := "/" if startswith(b, "/")

path_key(_, c) := c if c != ""

operands(args) := [a | some a in args; not startswith(a, "-")]

short_flag(args, letters) if {
	some a in args
	regex.match(sprintf(`^-[a-zA-Z]*[%s][a-zA-Z]*$`, [letters]), a)
}

recursive(args) if short_flag(args, "rR")

recursive(args) if "--recursive" in args

findings contains {
	"disposition": "deny",
	"rule_id": "shell.rm_recursive_critical_path",
	"reason_codes": ["destructive_command", "recursive_delete_critical_path"],
	"reasoning": sprintf("recursive delete of %s would destroy the system or a home directory", [t]),
} if {
	some inv in invocations
	inv.cmd in {"rm", "rmdir", "shred", "srm"}
	recursive(inv.args)
	some t in operands(inv.args)
	critical(t)
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.rm_no_preserve_root",
	"reason_codes": ["destructive_command", "recursive_delete_critical_path"],
	"reasoning": "rm --no-preserve-root disables the guard against deleting /",
} if {
	some inv in invocations
	inv.cmd == "rm"
	"--no-preserve-root" in inv.args
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.find_delete_critical_path",
	"reason_codes": ["destructive_command", "recursive_delete_critical_path"],
	"reasoning": sprintf("find %s deleting what it finds would delete a system or home tree", [t]),
} if {
	some inv in invocations
	inv.cmd == "find"
	find_deletes(inv.args)
	t := inv.args[0]
	critical(t)
}

find_deletes(args) if "-delete" in args

find_deletes(args) if {
	some i, a in args
	a in {"-exec", "-execdir", "-ok", "-okdir"}
	regex.match(`^(?:\S*/)?(?:rm|shred|srm)$`, args[i + 1])
}

# cd / && rm -rf *: the target is relative, but the directory is not.
findings contains {
	"disposition": "deny",
	"rule_id": "shell.rm_recursive_after_cd_critical_path",
	"reason_codes": ["destructive_command", "recursive_delete_critical_path"],
	"reasoning": sprintf("recursive delete of %s inside %s would destroy the system or a home directory", [t, dir]),
} if {
	some line in suspicious
	some m in regex.find_all_string_submatch_n(
		`(?:^|[;&|]\s*)cd\s+(\S+)\s*(?:&&|;)\s*(?:sudo\s+)?(?:\S*/)?rm\s+((?:-\S+\s+)*)(\*|\.|\./\*|\.\*)(?:\s|$)`,
		line, -1,
	)
	dir := m[1]
	critical(dir)
	recursive(split(trim_space(m[2]), " "))
	t := m[3]
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.format_filesystem",
	"reason_codes": ["destructive_command", "filesystem_format"],
	"reasoning": sprintf("%s formats or wipes a filesystem", [inv.cmd]),
} if {
	some inv in invocations
	regex.match(`^(?:mkfs(?:\..+)?|mke2fs|mkswap|wipefs|newfs(?:_.+)?|format)$`, inv.cmd)
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.format_filesystem",
	"reason_codes": ["destructive_command", "filesystem_format"],
	"reasoning": "diskutil eraseDisk wipes a disk",
} if {
	some inv in invocations
	inv.cmd == "diskutil"
	some a in inv.args
	regex.match(`^(?i:erase(?:disk|volume)|zerodisk|secureerase|partitiondisk)$`, a)
}

block_device := `/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme[0-9]|mmcblk[0-9]|r?disk[0-9]|md[0-9]|dm-[0-9]|mapper/|loop[0-9]|root\b)`

findings contains {
	"disposition": "deny",
	"rule_id": "shell.write_block_device",
	"reason_codes": ["destructive_command", "raw_device_write"],
	"reasoning": sprintf("dd writes directly to the block device in %s", [a]),
} if {
	some inv in invocations
	inv.cmd == "dd"
	some a in inv.args
	regex.match(concat("", [`^of=`, block_device]), a)
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.write_block_device",
	"reason_codes": ["destructive_command", "raw_device_write"],
	"reasoning": sprintf("%s writes directly to the block device %s", [inv.cmd, a]),
} if {
	some inv in invocations
	inv.cmd in {"tee", "shred", "blkdiscard", "cp", "install"}
	some a in device_targets(inv)
	regex.match(concat("", ["^", block_device]), a)
}

# device_targets are the operands a command writes to: all of them for
# tee, shred and blkdiscard, the last one for cp and install.
device_targets(inv) := operands(inv.args) if inv.cmd in {"tee", "shred", "blkdiscard"}

device_targets(inv) := [ops[count(ops) - 1]] if {
	inv.cmd in {"cp", "install"}
	ops := operands(inv.args)
	count(ops) > 1
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.write_block_device",
	"reason_codes": ["destructive_command", "raw_device_write"],
	"reasoning": "output is redirected onto a block device",
} if {
	some line in suspicious
	regex.match(concat("", [`>>?\s*`, block_device]), line)
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.fork_bomb",
	"reason_codes": ["destructive_command", "fork_bomb"],
	"reasoning": sprintf("function %s calls itself twice in the background: a fork bomb", [f]),
} if {
	some line in suspicious
	s := regex.replace(line, `\s+`, "")
	some m in array.concat(
		regex.find_all_string_submatch_n(`([A-Za-z_:.][A-Za-z0-9_:.]*)\(\)\{`, s, -1),
		regex.find_all_string_submatch_n(`function([A-Za-z_][A-Za-z0-9_]*?)(?:\(\))?\{`, s, -1),
	)
	f := m[1]
	contains(s, concat("", [f, "|", f, "&"]))
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.fork_bomb",
	"reason_codes": ["destructive_command", "fork_bomb"],
	"reasoning": "%0|%0 is a batch-file fork bomb",
} if {
	some line in suspicious
	contains(regex.replace(line, `\s+`, ""), "%0|%0")
}

interpreter := `(?:\S*/)?(?:sh|bash|zsh|dash|ksh|fish|csh|tcsh|python[0-9.]*|perl|ruby|node|php|osascript)\b`

downloader := `\b(?:curl|wget|fetch|aria2c|http|https|xh)\b`

findings contains {
	"disposition": "deny",
	"rule_id": "shell.pipe_remote_to_interpreter",
	"reason_codes": ["remote_code_execution"],
	"reasoning": "a downloaded script would run without review (download piped or substituted into an interpreter)",
} if {
	some line in suspicious
	some pattern in [
		# curl https://x | sudo bash, wget -qO- x | sh -s --
		concat("", [downloader, `[^;&]*\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+)?`, interpreter]),
		# bash <(curl x), source <(curl x)
		concat("", [`(?:`, interpreter, `|\bsource|\.)\s+(?:-\S+\s+)*<\(\s*`, downloader]),
		# sh -c "$(curl x)", eval "$(wget -O- x)"
		concat("", [`(?:`, interpreter, `|\beval)\s+(?:-\S+\s+)*\$\(\s*`, downloader]),
		# PowerShell: iwr x | iex, iex (irm x)
		`(?i)\b(?:iwr|irm|invoke-webrequest|invoke-restmethod|curl|wget)\b.*\|\s*(?:iex|invoke-expression)\b`,
		`(?i)\b(?:iex|invoke-expression)\s*\(\s*(?:iwr|irm|invoke-webrequest|invoke-restmethod|new-object\s+net\.webclient)`,
	]
	regex.match(pattern, line)
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.recursive_permission_change_critical_path",
	"reason_codes": ["destructive_command", "permission_change_critical_path"],
	"reasoning": sprintf("recursive %s on %s would break the system's permissions", [inv.cmd, t]),
} if {
	some inv in invocations
	inv.cmd in {"chmod", "chown", "chgrp", "setfacl"}
	recursive(inv.args)
	some t in operands(inv.args)
	critical(t)
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.world_writable_root",
	"reason_codes": ["destructive_command", "permission_change_critical_path"],
	"reasoning": sprintf("chmod %s %s makes a system directory world-writable", [mode, t]),
} if {
	some inv in invocations
	inv.cmd == "chmod"
	ops := operands(inv.args)
	mode := ops[0]
	world_writable(mode)
	some t in array.slice(ops, 1, count(ops))
	critical(t)
}

world_writable(mode) if regex.match(`^0*[0-7]?[0-7]{2}[2367]$`, mode)

world_writable(mode) if regex.match(`(?:^|,)[ugo]*[ao]?[ugo]*[+=][rwxXst]*w`, mode)

protected_branches := {b | some b in data.guardian.shell.protected_branches}

# pushed_branch is the destination branch of a refspec: main, +main,
# HEAD:main, +HEAD:refs/heads/main, :main.
pushed_branch(refspec) := trim_prefix(dst, "refs/heads/") if {
	parts := split(trim_prefix(refspec, "+"), ":")
	dst := parts[count(parts) - 1]
}

force_push(args, _) if short_flag(args, "f")

force_push(args, _) if {
	some a in args
	regex.match(`^--force(?:-with-lease(?:=.*)?|-if-includes)?$`, a)
}

force_push(_, refspec) if startswith(refspec, "+")

git_push_args(inv) := array.slice(inv.args, i + 1, count(inv.args)) if {
	inv.cmd == "git"
	some i, a in inv.args
	a == "push"
	not pushes_earlier(inv.args, i)
}

pushes_earlier(args, i) if {
	some j, a in args
	j < i
	a == "push"
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.git_force_push_protected_branch",
	"reason_codes": ["protected_branch_rewrite"],
	"reasoning": sprintf("force push to the protected branch %s would rewrite shared history", [b]),
} if {
	some inv in invocations
	inv.cmd == "git"
	args := git_push_args(inv)
	some refspec in operands(args)
	b := pushed_branch(refspec)
	b in protected_branches
	force_push(args, refspec)
}

findings contains {
	"disposition": "deny",
	"rule_id": "shell.git_delete_protected_branch",
	"reason_codes": ["protected_branch_rewrite"],
	"reasoning": sprintf("push would delete the protected branch %s", [b]),
} if {
	some inv in invocations
	inv.cmd == "git"
	args := git_push_args(inv)
	some refspec in operands(args)
	b := pushed_branch(refspec)
	b in protected_branches
	deletes(args, refspec)
}

deletes(_, refspec) if startswith(refspec, ":")

deletes(args, _) if "--delete" in args

deletes(args, _) if short_flag(args, "d")
