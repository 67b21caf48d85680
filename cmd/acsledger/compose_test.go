package main

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestComposeFile keeps docker-compose.yml valid without a Docker engine:
// it parses as YAML, the service migrates and then serves the same
// database, keys live on a writable volume (the source is mounted
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
	for _, want := range []string{"acsledger migrate --db", "acsledger serve --db", "--keys /keys", "--addr 0.0.0.0:8080"} {
		if !strings.Contains(script, want) {
			t.Errorf("command %q lacks %q", script, want)
		}
	}
	if !strings.HasPrefix(app.Environment["ACSLEDGER_DB"], "postgres://") {
		t.Errorf("ACSLEDGER_DB = %q", app.Environment["ACSLEDGER_DB"])
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
