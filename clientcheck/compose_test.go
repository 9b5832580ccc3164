package main

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// maxReplicas is how many owed replicas the compose file must hold on PostgreSQL as set.
const maxReplicas = 4

// loadCompose loads ../docker-compose.yml with the compose loader (what `docker compose
// config` runs), every profile on, and the admin token given.
func loadCompose(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	ctx := context.Background()
	details, err := loader.LoadConfigFiles(ctx, []string{"../docker-compose.yml"}, "..")
	if err != nil {
		t.Fatal(err)
	}
	details.Environment = types.Mapping(env)
	p, err := loader.LoadWithContext(ctx, *details, func(o *loader.Options) {
		o.SetProjectName("owed", true)
		o.Profiles = []string{"*"}
	})
	if err != nil {
		t.Fatalf("the compose file does not load: %v", err)
	}
	return p
}

// TestComposeFile: the compose file loads; PostgreSQL's max_connections holds maxReplicas
// replicas at their OWED_DATABASE_MAX_CONNS with room to spare; owed's health check keeps the
// image's start period; a profile runs the embedded SQLite default on its own; and without
// OWED_ADMIN_TOKEN it refuses to load.
func TestComposeFile(t *testing.T) {
	p := loadCompose(t, map[string]string{"OWED_ADMIN_TOKEN": strings.Repeat("a", 48)})

	pg, err := p.GetService("postgres")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^max_connections=(\d+)$`)
	maxConns := 0
	for _, arg := range pg.Command {
		if s := m.FindStringSubmatch(arg); s != nil {
			maxConns, _ = strconv.Atoi(s[1])
		}
	}
	owed, err := p.GetService("owed")
	if err != nil {
		t.Fatal(err)
	}
	per := 32 // owed's default, when the file does not set one
	if v := owed.Environment["OWED_DATABASE_MAX_CONNS"]; v != nil {
		per, _ = strconv.Atoi(*v)
	}
	if maxConns == 0 {
		maxConns = 100 // PostgreSQL's default
	}
	// Each replica holds its pool and two connections more: one for /readyz, one that LISTENs.
	if need := maxReplicas*(per+2) + 10; need > maxConns {
		t.Errorf("%d replicas x (%d connections + /readyz + LISTEN) + 10 reserved = %d, over PostgreSQL's max_connections %d", maxReplicas, per, need, maxConns)
	}
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "replicas x (OWED_DATABASE_MAX_CONNS + 2) + 10") {
		t.Error("the compose file's comment does not give the connection formula with the /readyz and LISTEN connections")
	}

	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	start := regexp.MustCompile(`--start-period=(\S+)`).FindSubmatch(dockerfile)
	if start == nil {
		t.Fatal("the Dockerfile's HEALTHCHECK has no start period")
	}
	want, _ := time.ParseDuration(string(start[1]))
	for _, name := range []string{"owed", "owed-sqlite"} {
		s, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		if s.HealthCheck == nil || s.HealthCheck.StartPeriod == nil || time.Duration(*s.HealthCheck.StartPeriod) != want {
			t.Errorf("%s: the health check drops the image's start period %s: %+v", name, want, s.HealthCheck)
		}
	}

	lite, err := p.GetService("owed-sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(lite.Profiles, "sqlite") || len(lite.DependsOn) != 0 {
		t.Errorf("owed-sqlite: profiles %v, depends on %v: want the sqlite profile, alone", lite.Profiles, lite.DependsOn)
	}
	if v := lite.Environment["OWED_DATABASE_URL"]; v != nil && *v != "" {
		t.Errorf("owed-sqlite has OWED_DATABASE_URL %q: want the embedded SQLite", *v)
	}

	if _, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{WorkingDir: "..",
		ConfigFiles: []types.ConfigFile{{Filename: "../docker-compose.yml"}}, Environment: types.Mapping{}},
		func(o *loader.Options) { o.SetProjectName("owed", true) }); err == nil || !strings.Contains(err.Error(), "OWED_ADMIN_TOKEN") {
		t.Errorf("without OWED_ADMIN_TOKEN: %v, want a refusal naming it", err)
	}
}

// TestComposeScales: `docker compose up --scale owed=3` works as the file's comment says. A
// scaled service can bind no fixed host port nor take a fixed container name (Docker refuses
// the second replica), so owed publishes none; a proxy publishes 127.0.0.1:8080 and forwards to
// the service's name, which Docker's DNS answers with every replica; and the proxy starts once
// owed is healthy.
func TestComposeScales(t *testing.T) {
	p := loadCompose(t, map[string]string{"OWED_ADMIN_TOKEN": strings.Repeat("a", 48)})
	owed, err := p.GetService("owed")
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range owed.Ports {
		if port.Published != "" {
			t.Errorf("owed publishes host port %s: a second replica cannot bind it", port.Published)
		}
	}
	if owed.ContainerName != "" {
		t.Errorf("owed has container_name %q: a second replica cannot take it", owed.ContainerName)
	}
	proxy, err := p.GetService("proxy")
	if err != nil {
		t.Fatal(err)
	}
	published := false
	for _, port := range proxy.Ports {
		published = published || port.HostIP == "127.0.0.1" && port.Published == "8080" && port.Target == 8080
	}
	if !published || !slices.Equal(proxy.Command, types.ShellCommand{"caddy", "reverse-proxy", "--from", ":8080", "--to", "owed:8080"}) {
		t.Errorf("proxy: ports %+v, command %q: want 127.0.0.1:8080 forwarded to owed:8080", proxy.Ports, proxy.Command)
	}
	if dep, ok := proxy.DependsOn["owed"]; !ok || dep.Condition != types.ServiceConditionHealthy {
		t.Errorf("proxy depends on %+v: want owed healthy", proxy.DependsOn)
	}
	if v := owed.Environment["OWED_TRUSTED_PROXIES"]; v == nil || *v == "" {
		t.Error("owed does not trust the proxy's X-Forwarded-For: every client would count as the proxy")
	}

}

// TestDockerignore: the build context leaves out the local database and the git history.
func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for _, must := range []string{".git", "data", "**/data", "*.db"} {
		if !slices.Contains(lines, must) {
			t.Errorf(".dockerignore does not leave out %s", must)
		}
	}
}
