package main

import (
	"encoding/json"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dockerStage is one FROM of a Dockerfile and the instructions under it.
type dockerStage struct {
	base, name string
	instrs     []dockerInstr
}

// dockerInstr is one instruction: its upper-cased keyword and the rest of
// its line, continuation lines joined.
type dockerInstr struct {
	op, args string
}

// parseDockerfile splits a Dockerfile into stages. It knows only what
// TestDockerfile needs: comments, backslash continuations, FROM ... AS.
func parseDockerfile(t *testing.T, text string) []dockerStage {
	t.Helper()
	var stages []dockerStage
	var logical string
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if more, ok := strings.CutSuffix(trimmed, "\\"); ok && i < len(lines)-1 {
			logical += more + " "
			continue
		}
		logical += trimmed
		op, args, _ := strings.Cut(strings.TrimSpace(logical), " ")
		logical = ""
		if op == "" {
			continue
		}
		op, args = strings.ToUpper(op), strings.TrimSpace(args)
		if op == "FROM" {
			f := strings.Fields(args)
			s := dockerStage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if op != "ARG" {
				t.Fatalf("Dockerfile: %s before the first FROM", op)
			}
			continue
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, dockerInstr{op, args})
	}
	return stages
}

// copyFlags splits COPY's --from= and --chown= off its sources and
// destination.
func copyFlags(args string) (from, chown string, srcs []string, dst string) {
	var rest []string
	for _, f := range strings.Fields(args) {
		if v, ok := strings.CutPrefix(f, "--from="); ok {
			from = v
		} else if v, ok := strings.CutPrefix(f, "--chown="); ok {
			chown = v
		} else {
			rest = append(rest, f)
		}
	}
	if len(rest) < 2 {
		return from, chown, nil, ""
	}
	return from, chown, rest[:len(rest)-1], rest[len(rest)-1]
}

// goBuilds maps the -o output of each `go build` in a stage's RUN lines
// to the package it builds, counting only builds with cgo off: the final
// image has no libc, so a cgo binary would not start there.
func goBuilds(s dockerStage) map[string]string {
	cgoOff := false
	out := make(map[string]string)
	for _, in := range s.instrs {
		if in.op == "ENV" && strings.Contains(in.args, "CGO_ENABLED=0") {
			cgoOff = true
		}
		if in.op != "RUN" {
			continue
		}
		for cmd := range strings.SplitSeq(in.args, "&&") {
			f := strings.Fields(cmd)
			i := slices.Index(f, "go")
			if i < 0 || i+1 >= len(f) || f[i+1] != "build" {
				continue
			}
			if !cgoOff && !slices.Contains(f[:i], "CGO_ENABLED=0") {
				continue
			}
			var o, pkg string
			for j := i + 2; j < len(f); j++ {
				switch {
				case f[j] == "-o" && j+1 < len(f):
					o = f[j+1]
					j++
				case strings.HasPrefix(f[j], "./"):
					pkg = f[j]
				}
			}
			if o != "" && pkg != "" {
				out[o] = pkg
			}
		}
	}
	return out
}

// TestDockerfile checks the image docker-compose.yml runs without a Docker
// engine: a build stage compiles acsledger with cgo off, and the final
// stage is another, small base that runs the binary copied from the build
// stage as a non-root user, which owns the directories it writes.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, string(b))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a final one", len(stages))
	}
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.base, "gcr.io/distroless/static") && final.base != "scratch" {
		t.Errorf("final stage FROM %s: want distroless/static or scratch, which a static binary needs and nothing more", final.base)
	}

	// The last USER of the final stage runs everything: not root.
	var user, entry string
	var volumes []string
	for _, in := range final.instrs {
		switch in.op {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			var argv []string
			if err := json.Unmarshal([]byte(in.args), &argv); err != nil || len(argv) == 0 {
				t.Fatalf("ENTRYPOINT %s: want the exec form, [\"/binary\"] (the image has no shell): %v", in.args, err)
			}
			entry = argv[0]
		case "VOLUME":
			if err := json.Unmarshal([]byte(in.args), &volumes); err != nil {
				volumes = strings.Fields(in.args)
			}
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); uid != "nonroot" && (err != nil || n <= 0) {
		t.Errorf("final stage USER %q: want a non-root user, numeric or nonroot", user)
	}
	if entry == "" {
		t.Fatal("final stage has no ENTRYPOINT")
	}

	// The entrypoint is a binary the build stage built from ./cmd/acsledger
	// with cgo off, copied into the final stage; the directories the
	// service writes are copied in owned by its user.
	var entryFrom string
	owned := make(map[string]bool)
	for _, in := range final.instrs {
		if in.op != "COPY" {
			continue
		}
		from, chown, srcs, dst := copyFlags(in.args)
		for _, src := range srcs {
			to := dst
			if strings.HasSuffix(dst, "/") || len(srcs) > 1 {
				to = path.Join(dst, path.Base(src))
			}
			if to == entry {
				entryFrom = from + ":" + src
			}
			if c, _, _ := strings.Cut(chown, ":"); c != "" && c == uid {
				owned[to] = true
			}
		}
	}
	buildName, src, ok := strings.Cut(entryFrom, ":")
	if !ok || buildName == "" {
		t.Fatalf("ENTRYPOINT %s is not copied from a build stage (COPY --from=...)", entry)
	}
	i := slices.IndexFunc(stages, func(s dockerStage) bool { return s.name == buildName })
	if i < 0 || i == len(stages)-1 {
		t.Fatalf("COPY --from=%s: no earlier stage of that name", buildName)
	}
	builds := goBuilds(stages[i])
	if pkg := builds[src]; pkg != "./cmd/acsledger" {
		t.Errorf("ENTRYPOINT %s is %s from stage %s, which builds (with CGO_ENABLED=0) %v: want ./cmd/acsledger", entry, src, buildName, builds)
	}
	if !slices.Contains(slices.Collect(maps.Values(builds)), "./cmd/acsverify") {
		t.Errorf("stage %s does not build ./cmd/acsverify with CGO_ENABLED=0: %v", buildName, builds)
	}
	if len(volumes) == 0 {
		t.Error("final stage declares no VOLUME for the keys and the data")
	}
	for _, v := range volumes {
		if !owned[v] {
			t.Errorf("VOLUME %s is not copied in owned by the user %s: a fresh volume there would not be writable", v, uid)
		}
	}
	if !slices.Contains(volumes, "/keys") {
		t.Errorf("VOLUME %v lacks /keys, where docker-compose.yml keeps the keys", volumes)
	}
}
