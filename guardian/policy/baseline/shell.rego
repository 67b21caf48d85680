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

# A line with nothing to remove, no run of blanks and no blank at either
# end is already normal (the common case: ls -la, go test ./...).
normalize(c) := c if not regex.match(`["'\\$\t\r\n]|  |^[\t\n\v\f\r\x{85}\pZ]|[\t\n\v\f\r\x{85}\pZ]$`, c)

else := n if {
	a := regex.replace(c, `\\\r?\n`, " ")
	b := regex.replace(a, `\$\{IFS\}|\$IFS\b`, " ")
	d := regex.replace(b, `["'\\]`, "")
	n := trim_space(regex.replace(d, `[ \t\r\n]+`, " "))
}

# findings are the destructive commands found, computed only when some
# command line is suspicious: most steps stop here.
findings := destructive if count(suspicious) > 0

else := set()

# suspicious are the normalized command lines that could meet some rule
# below; the others (ls, git status, go test, docker run --rm, cmd
# 2>/dev/null ...) skip the analysis. trigger names what each rule needs:
# a command the rules look at, as a command (a word not part of an --option);
# for the rm family and recursive permission changes a flag after it; for
# git push, find -delete/-exec and download-and-run the other word, pipe
# or parenthesis those rules need too; a block device for raw writes (dd,
# tee, cp, install, blkdiscard, redirection).
suspicious contains line if {
	some line in normalized
	regex.match(trigger, line)
}

trigger := `(?i)(?:^|[^-])\b(?:rm|rmdir|shred|srm)\b.*\s-(?:[a-z]*r|-recursive|-no-preserve-root)|(?:^|[^-])\b(?:mkfs|mke2fs|mkswap|wipefs|newfs|format|diskutil|chmod|chown|chgrp|setfacl)\b|\bfunction\b|\bfind\b.*-(?:delete|exec|ok)|\bgit\b.*\bpush\b|\b(?:curl|wget|fetch|aria2c|https?|xh|iwr|irm|invoke-webrequest|invoke-restmethod|iex|invoke-expression)\b.*[|(]|[|(].*\b(?:curl|wget|fetch|aria2c|https?|xh|iwr|irm|invoke-webrequest|invoke-restmethod|iex|invoke-expression)\b|/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme[0-9]|mmcblk[0-9]|r?disk[0-9]|md[0-9]|dm-[0-9]|mapper/|loop[0-9]|root\b)|\(\s*\)|%0`

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
wrappers := `^\s*(?:(?:(?:\S*/)?(?:sudo|doas|env|nohup|time|nice|ionice|command|exec|builtin|xargs|timeout|stdbuf|busybox|sh|bash|zsh|dash|ksh|eval|watch|setsid|unbuffer|\{|!)|chroot\s+\S+|-[ugUCsnph]\s+\S+|-\S*|[A-Za-z_][A-Za-z0-9_]*=\S*|[0-9]+[smhd]?)(?:\s+|$))*`

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

destructive contains {
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

destructive contains {
	"disposition": "deny",
	"rule_id": "shell.rm_no_preserve_root",
	"reason_codes": ["destructive_command", "recursive_delete_critical_path"],
	"reasoning": "rm --no-preserve-root disables the guard against deleting /",
} if {
	some inv in invocations
	inv.cmd == "rm"
	"--no-preserve-root" in inv.args
}

destructive contains {
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
destructive contains {
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

destructive contains {
	"disposition": "deny",
	"rule_id": "shell.format_filesystem",
	"reason_codes": ["destructive_command", "filesystem_format"],
	"reasoning": sprintf("%s formats or wipes a filesystem", [inv.cmd]),
} if {
	some inv in invocations
	regex.match(`^(?:mkfs(?:\..+)?|mke2fs|mkswap|wipefs|newfs(?:_.+)?|format)$`, inv.cmd)
}

destructive contains {
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

destructive contains {
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

destructive contains {
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

destructive contains {
	"disposition": "deny",
	"rule_id": "shell.write_block_device",
	"reason_codes": ["destructive_command", "raw_device_write"],
	"reasoning": "output is redirected onto a block device",
} if {
	some line in suspicious
	regex.match(concat("", [`>>?\s*`, block_device]), line)
}

destructive contains {
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

destructive contains {
	"disposition": "deny",
	"rule_id": "shell.fork_bomb",
	"reason_codes": ["destructive_command", "fork_bomb"],
	"reasoning": "%0|%0 is a batch-file fork bomb",
} if {
	some line in suspicious
	contains(regex.replace(line, `\s+`, ""), "%0|%0")
}

# remote_patterns each spot a downloaded script run without review;
# remote_execution is all of them in one alternation, each wrapped as
# (?:p), written out so that no decision pays for building it
# (TestBaselineDerivedConstants checks it against remote_patterns). In the
# patterns, an interpreter is (?:\S*/)?(?:sh|bash|zsh|dash|ksh|fish|csh|
# tcsh|python[0-9.]*|perl|ruby|node|php|osascript)\b and a downloader is
# \b(?:curl|wget|fetch|aria2c|http|https|xh)\b.
remote_patterns := [
	# curl https://x | sudo bash, wget -qO- x | sh -s --
	`\b(?:curl|wget|fetch|aria2c|http|https|xh)\b[^;&]*\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+)?(?:\S*/)?(?:sh|bash|zsh|dash|ksh|fish|csh|tcsh|python[0-9.]*|perl|ruby|node|php|osascript)\b`,
	# bash <(curl x), source <(curl x)
	`(?:(?:\S*/)?(?:sh|bash|zsh|dash|ksh|fish|csh|tcsh|python[0-9.]*|perl|ruby|node|php|osascript)\b|\bsource|\.)\s+(?:-\S+\s+)*<\(\s*\b(?:curl|wget|fetch|aria2c|http|https|xh)\b`,
	# sh -c "$(curl x)", eval "$(wget -O- x)"
	`(?:(?:\S*/)?(?:sh|bash|zsh|dash|ksh|fish|csh|tcsh|python[0-9.]*|perl|ruby|node|php|osascript)\b|\beval)\s+(?:-\S+\s+)*\$\(\s*\b(?:curl|wget|fetch|aria2c|http|https|xh)\b`,
	# PowerShell: iwr x | iex, iex (irm x)
	`(?i)\b(?:iwr|irm|invoke-webrequest|invoke-restmethod|curl|wget)\b.*\|\s*(?:iex|invoke-expression)\b`,
	`(?i)\b(?:iex|invoke-expression)\s*\(\s*(?:iwr|irm|invoke-webrequest|invoke-restmethod|new-object\s+net\.webclient)`,
]

remote_execution := `(?:\b(?:curl|wget|fetch|aria2c|http|https|xh)\b[^;&]*\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+)?(?:\S*/)?(?:sh|bash|zsh|dash|ksh|fish|csh|tcsh|python[0-9.]*|perl|ruby|node|php|osascript)\b)|(?:(?:(?:\S*/)?(?:sh|bash|zsh|dash|ksh|fish|csh|tcsh|python[0-9.]*|perl|ruby|node|php|osascript)\b|\bsource|\.)\s+(?:-\S+\s+)*<\(\s*\b(?:curl|wget|fetch|aria2c|http|https|xh)\b)|(?:(?:(?:\S*/)?(?:sh|bash|zsh|dash|ksh|fish|csh|tcsh|python[0-9.]*|perl|ruby|node|php|osascript)\b|\beval)\s+(?:-\S+\s+)*\$\(\s*\b(?:curl|wget|fetch|aria2c|http|https|xh)\b)|(?:(?i)\b(?:iwr|irm|invoke-webrequest|invoke-restmethod|curl|wget)\b.*\|\s*(?:iex|invoke-expression)\b)|(?:(?i)\b(?:iex|invoke-expression)\s*\(\s*(?:iwr|irm|invoke-webrequest|invoke-restmethod|new-object\s+net\.webclient))`

destructive contains {
	"disposition": "deny",
	"rule_id": "shell.pipe_remote_to_interpreter",
	"reason_codes": ["remote_code_execution"],
	"reasoning": "a downloaded script would run without review (download piped or substituted into an interpreter)",
} if {
	some line in suspicious
	regex.match(remote_execution, line)
}

destructive contains {
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

destructive contains {
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

destructive contains {
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

destructive contains {
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
