package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestComposeFile keeps docker-compose.yml valid without a Docker engine:
// it parses as YAML, the service migrates the database as its owner login
// and then serves it as the writer login, no superuser, keys live on a writable volume (the source is mounted
// read-only), every named volume a service mounts is declared, and the
// flags it passes exist.
func TestComposeFile(t *testing.T) {
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			WorkingDir  string            `yaml:"working_dir"`
			Command     []string          `yaml:"command"`
			Volumes     []string          `yaml:"volumes"`
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
			Healthcheck map[string]any    `yaml:"healthcheck"`
			DependsOn   map[string]any    `yaml:"depends_on"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	app, ok := doc.Services["acsledger"]
	if !ok || doc.Services["postgres"].Image == "" {
		t.Fatalf("services %v: want acsledger and postgres", doc.Services)
	}
	if _, ok := app.DependsOn["postgres"]; !ok {
		t.Error("acsledger does not wait for postgres")
	}
	script := strings.Join(app.Command, " ")
	for _, want := range []string{"acsledger migrate --db \"$$ACSLEDGER_OWNER_DB\"", "acsledger serve --db \"$$ACSLEDGER_DB\"", "--keys /keys", "--addr 0.0.0.0:8080"} {
		if !strings.Contains(script, want) {
			t.Errorf("command %q lacks %q", script, want)
		}
	}
	// Least privilege: migrate as the owner login, serve as the writer
	// login, and neither is the image's superuser, whose only job is the
	// init script that creates them (TestLeastPrivilege runs it).
	pg := doc.Services["postgres"]
	for v, user := range map[string]string{"ACSLEDGER_OWNER_DB": "acsledger_owner", "ACSLEDGER_DB": "acsledger_writer"} {
		if got := app.Environment[v]; !strings.HasPrefix(got, "postgres://"+user+":") {
			t.Errorf("%s = %q, want a postgres:// URL of the %s login", v, got, user)
		}
	}
	if su := pg.Environment["POSTGRES_USER"]; su == "" || strings.Contains(app.Environment["ACSLEDGER_OWNER_DB"]+app.Environment["ACSLEDGER_DB"], "//"+su+":") {
		t.Errorf("acsledger connects as the image's superuser %q", su)
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
	// The flags the compose file passes are serve's.
	var out, errs strings.Builder
	run(t.Context(), []string{"serve", "-h"}, &out, &errs)
	usage := out.String() + errs.String()
	for _, flag := range []string{"-db", "-keys", "-addr"} {
		if !strings.Contains(script, "-"+flag+" ") {
			t.Errorf("command does not pass -%s", flag)
		}
		if !strings.Contains(usage, "  "+flag+" ") {
			t.Errorf("serve has no flag %s:\n%s", flag, usage)
		}
	}
}
