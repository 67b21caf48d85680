package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/ledger/storeopen"
	"go.yaml.in/yaml/v3"
)

// TestComposeFile keeps docker-compose.yml valid without a Docker engine:
// it parses as YAML, a one-shot service migrates the database as its
// owner login and the service then serves it as the writer login, once
// migrate succeeded; no superuser; keys live on a writable volume; every
// named volume a service mounts is declared; and the flags each passes
// exist. Both run the Dockerfile's image, which has no shell, so each
// command is one acsledger invocation (TestDockerfile checks the image).
func TestComposeFile(t *testing.T) {
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Build       string            `yaml:"build"`
			Image       string            `yaml:"image"`
			WorkingDir  string            `yaml:"working_dir"`
			Command     []string          `yaml:"command"`
			Volumes     []string          `yaml:"volumes"`
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
			Healthcheck map[string]any    `yaml:"healthcheck"`
			DependsOn   map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	app, ok := doc.Services["acsledger"]
	mig, migOK := doc.Services["acsledger-migrate"]
	if !ok || !migOK || doc.Services["postgres"].Image == "" {
		t.Fatalf("services %v: want acsledger, acsledger-migrate and postgres", doc.Services)
	}
	for name, svc := range map[string]struct{ build, image string }{"acsledger": {app.Build, app.Image}, "acsledger-migrate": {mig.Build, mig.Image}} {
		if svc.build != "." || svc.image != mig.Image {
			t.Errorf("%s: build %q, image %q: want the Dockerfile's image (build: .) under one name", name, svc.build, svc.image)
		}
	}
	if c := mig.DependsOn["postgres"].Condition; c != "service_healthy" {
		t.Errorf("acsledger-migrate waits for postgres with condition %q, want service_healthy", c)
	}
	if c := app.DependsOn["acsledger-migrate"].Condition; c != "service_completed_successfully" {
		t.Errorf("acsledger waits for acsledger-migrate with condition %q, want service_completed_successfully", c)
	}
	if _, ok := app.DependsOn["postgres"]; !ok {
		t.Error("acsledger does not wait for postgres")
	}
	// The image's entrypoint is acsledger: a command is its arguments.
	if len(mig.Command) == 0 || mig.Command[0] != "migrate" {
		t.Errorf("acsledger-migrate command %q, want acsledger migrate", mig.Command)
	}
	if len(app.Command) == 0 || app.Command[0] != "serve" {
		t.Errorf("acsledger command %q, want acsledger serve", app.Command)
	}
	script := strings.Join(app.Command, " ")
	for _, want := range []string{"--keys /keys", "--addr 0.0.0.0:8080", "--admin-token-file /keys/"} {
		if !strings.Contains(script, want) {
			t.Errorf("command %q lacks %q", script, want)
		}
	}
	// Least privilege: migrate as the owner login, serve as the writer
	// login, and neither is the image's superuser, whose only job is the
	// init script that creates them (TestLeastPrivilege runs it).
	// Each takes its URL from the environment variable --db defaults to,
	// so no password is on a command line.
	pg := doc.Services["postgres"]
	for name, c := range map[string]struct {
		env  map[string]string
		cmd  []string
		user string
	}{"acsledger-migrate": {mig.Environment, mig.Command, "acsledger_owner"}, "acsledger": {app.Environment, app.Command, "acsledger_writer"}} {
		if got := c.env[storeopen.EnvURL]; !strings.HasPrefix(got, "postgres://"+c.user+":") {
			t.Errorf("%s: %s = %q, want a postgres:// URL of the %s login", name, storeopen.EnvURL, got, c.user)
		}
		if slices.Contains(c.cmd, "--db") || slices.Contains(c.cmd, "-db") {
			t.Errorf("%s passes --db on its command line %q, which overrides $%s", name, c.cmd, storeopen.EnvURL)
		}
		for v, url := range c.env {
			if su := pg.Environment["POSTGRES_USER"]; su == "" || strings.Contains(url, "//"+su+":") {
				t.Errorf("%s connects as the image's superuser %q (%s)", name, su, v)
			}
		}
	}
	var initScripts bool
	for _, v := range pg.Volumes {
		if src, dst, _ := strings.Cut(v, ":"); strings.HasPrefix(dst, "/docker-entrypoint-initdb.d") {
			b, err := os.ReadFile(filepath.Join("../..", src, "10-acsledger-roles.sh"))
			if err != nil {
				t.Fatalf("init script: %v", err)
			}
			for _, want := range []string{"CREATE ROLE acsledger_owner LOGIN NOSUPERUSER", "CREATE ROLE acsledger_writer LOGIN NOSUPERUSER NOCREATEROLE", "OWNER acsledger_owner"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("init script lacks %q", want)
				}
			}
			initScripts = true
		}
	}
	if !initScripts {
		t.Error("postgres mounts no init script creating the owner and writer logins")
	}
	var writableKeys bool
	for name, svc := range doc.Services {
		for _, v := range svc.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				if _, ok := doc.Volumes[src]; !ok {
					t.Errorf("service %s mounts volume %q, which is not declared", name, src)
				}
			}
			if name == "acsledger" && strings.HasPrefix(dst, "/keys") && !strings.HasSuffix(v, ":ro") {
				writableKeys = true
			}
		}
	}
	if !writableKeys {
		t.Error("acsledger has no writable /keys volume: serve could not write its keys on first start")
	}
	// The flags the compose file passes are the commands' own, and --db
	// reads the environment variable both services set.
	for _, c := range [][]string{mig.Command, app.Command} {
		var out, errs strings.Builder
		run(t.Context(), []string{c[0], "-h"}, &out, &errs)
		usage := out.String() + errs.String()
		if !strings.Contains(usage, "  -db ") || !strings.Contains(usage, "default $"+storeopen.EnvURL) {
			t.Errorf("%s: --db does not default to $%s:\n%s", c[0], storeopen.EnvURL, usage)
		}
		for _, arg := range c[1:] {
			if flag, ok := strings.CutPrefix(arg, "--"); ok && !strings.Contains(usage, "  -"+flag+" ") {
				t.Errorf("%s has no flag %s:\n%s", c[0], arg, usage)
			}
		}
	}
	for _, flag := range []string{"--keys", "--addr", "--admin-token-file"} {
		if !slices.Contains(app.Command, flag) {
			t.Errorf("serve's command does not pass %s", flag)
		}
	}
}
