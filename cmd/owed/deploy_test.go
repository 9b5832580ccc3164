package main

import (
	"bytes"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Docker does not run on the machines that test owed, so these tests check what can be
// checked without it: the compose file's wiring and the Dockerfile's promises.

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Volumes     []string `yaml:"volumes"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

func TestComposeWiresOwedToPostgres(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml is not valid YAML: %v", err)
	}
	pg, ok := c.Services["postgres"]
	if !ok || !strings.HasPrefix(pg.Image, "postgres:16") {
		t.Fatalf("want a postgres:16 service, got %+v", pg)
	}
	owed, ok := c.Services["owed"]
	if !ok || owed.Build == nil {
		t.Fatal("want an owed service built from the Dockerfile")
	}
	u, err := url.Parse(owed.Environment["OWED_DATABASE_URL"])
	if err != nil || u.Scheme != "postgres" {
		t.Fatalf("OWED_DATABASE_URL = %q, want a postgres:// URL", owed.Environment["OWED_DATABASE_URL"])
	}
	if u.Hostname() != "postgres" || u.Port() != "5432" {
		t.Errorf("OWED_DATABASE_URL points at %s, want the postgres service on 5432", u.Host)
	}
	pass, _ := u.User.Password()
	if u.User.Username() != pg.Environment["POSTGRES_USER"] || pass != pg.Environment["POSTGRES_PASSWORD"] ||
		strings.TrimPrefix(u.Path, "/") != pg.Environment["POSTGRES_DB"] {
		t.Errorf("OWED_DATABASE_URL %q does not match the postgres service's user, password and database", u.Redacted())
	}
	if owed.DependsOn["postgres"].Condition != "service_healthy" {
		t.Error("owed must wait for postgres to be healthy")
	}
	if len(pg.Healthcheck.Test) == 0 || !strings.Contains(strings.Join(pg.Healthcheck.Test, " "), "pg_isready") {
		t.Error("postgres needs a pg_isready health check")
	}
	if got := strings.Join(owed.Healthcheck.Test, " "); !strings.Contains(got, "owed health") {
		t.Errorf("owed health check = %q, want the owed health command", got)
	}
	for svc, mount := range map[string]string{"postgres": "/var/lib/postgresql/data", "owed": owed.Environment["OWED_DATA_DIR"]} {
		found := false
		for _, v := range c.Services[svc].Volumes {
			name, path, _ := strings.Cut(v, ":")
			if path == mount {
				found = true
				if _, declared := c.Volumes[name]; !declared {
					t.Errorf("%s mounts volume %q, which is not declared", svc, name)
				}
			}
		}
		if !found {
			t.Errorf("%s keeps %s outside a volume", svc, mount)
		}
	}
}

func TestDockerfileBuildsWithCgoAndRunsAsNonRoot(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(df, -1)); n < 2 {
		t.Errorf("want a multi-stage build, found %d stages", n)
	}
	if !strings.Contains(df, "CGO_ENABLED=1") {
		t.Error("SQLite needs cgo in the build stage")
	}
	gomod, _ := os.ReadFile("../../go.mod")
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goVersion == nil || !strings.Contains(df, "golang:"+string(goVersion[1])) {
		t.Errorf("the build image must match go.mod's Go %s", goVersion[1])
	}
	final := df[strings.LastIndex(df, "\nFROM "):]
	user := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(final)
	if user == nil || user[1] == "root" || user[1] == "0" {
		t.Error("the final stage must run as a non-root user")
	}
	if !strings.Contains(final, "VOLUME") || !strings.Contains(final, "OWED_DATA_DIR=/var/lib/owed") {
		t.Error("the data directory must be a volume")
	}
	if !strings.Contains(final, `"health"`) {
		t.Error("the image's health check should use owed health")
	}
}

func TestHealthCommand(t *testing.T) {
	t.Parallel()
	p := startOwed(t, "OWED_DATA_DIR="+t.TempDir())
	var out bytes.Buffer
	if err := health(strings.TrimPrefix(p.URL, "http://"), &out); err != nil || !strings.Contains(out.String(), "ready") {
		t.Fatalf("health of a ready server: %v %q", err, out.String())
	}
	if err := health(freeAddr(t), &out); err == nil {
		t.Fatal("health of nothing listening should fail")
	}
}
