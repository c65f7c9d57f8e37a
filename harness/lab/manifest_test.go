package lab

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const good = `
name: t
pools: [10.65.0.0/16]
nodes:
  - name: n1
    netns: {path: /var/run/netns/n1}
    blocks: [10.65.1.0/26]
    workloads:
      - {name: w1, netns: {path: /var/run/netns/w1}, interface: eth0, address: 10.65.1.2}
actions:
  killBIRD: kill-bird {node} {signal}
`

// A manifest with a mistake is refused with the file, the field and what
// would be valid.
func TestBadManifests(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field", good + "colour: blue\n", []string{`lab manifest "lab.yaml"`, "colour"}},
		{"duplicate key", "name: a\nname: b\n" + strings.TrimPrefix(good, "\nname: t"), []string{`"lab.yaml"`, "name"}},
		{"no name", strings.Replace(good, "name: t\n", "", 1), []string{"name: missing"}},
		{"no pools", strings.Replace(good, "pools: [10.65.0.0/16]\n", "", 1), []string{"pools: missing"}},
		{"bad pool", strings.Replace(good, "10.65.0.0/16", "10.65.0.1/16", 1), []string{"pools[0]", "not a CIDR"}},
		{"no nodes", "name: t\npools: [10.0.0.0/8]\n", []string{"nodes: missing"}},
		{"bad runtime", "runtime: dockr\n" + good, []string{`runtime: "dockr" is not one of docker, podman, crictl, runc`}},
		{"container without runtime", strings.Replace(good, "{path: /var/run/netns/n1}", "{container: kind-worker}", 1),
			[]string{`node "n1": netns: container "kind-worker": no runtime`, "docker, podman, crictl, runc"}},
		{"bad per-ref runtime", strings.Replace(good, "{path: /var/run/netns/n1}", "{container: c, runtime: lxc}", 1),
			[]string{`node "n1": netns: runtime "lxc" is not one of`}},
		{"two netns forms", strings.Replace(good, "{path: /var/run/netns/n1}", "{path: /x, container: c}", 1),
			[]string{`node "n1": netns: want exactly one of path`, "2 given"}},
		{"no netns", strings.Replace(good, "netns: {path: /var/run/netns/n1}", "netns: {}", 1), []string{"0 given"}},
		{"relative path", strings.Replace(good, "/var/run/netns/n1", "netns/n1", 1), []string{"want an absolute path"}},
		{"runtime without container", strings.Replace(good, "{path: /var/run/netns/n1}", "{path: /x, runtime: docker}", 1),
			[]string{`runtime "docker" without container`}},
		{"duplicate node", strings.Replace(good, "actions:", "  - {name: n1, netns: {path: /y}}\nactions:", 1), []string{`node "n1": name used twice`}},
		{"block outside pools", strings.Replace(good, "10.65.1.0/26", "10.66.1.0/26", 1), []string{`node "n1": blocks[0]: 10.66.1.0/26 is in none of the pools (10.65.0.0/16)`}},
		{"bad block", strings.Replace(good, "10.65.1.0/26", "10.65.1.7/26", 1), []string{"blocks[0]", "not a CIDR"}},
		{"bad workload address", strings.Replace(good, "address: 10.65.1.2", "address: ten", 1), []string{`workload "w1": address "ten"`}},
		{"bad interface", strings.Replace(good, "interface: eth0", "interface: averyveryverylongname0", 1), []string{`workload "w1": interface`}},
		{"workload named like a node", strings.Replace(good, "name: w1", "name: n1", 1), []string{`workload "n1": name used twice (also node n1)`}},
		{"unknown placeholder", strings.Replace(good, "{signal}", "{sig}", 1),
			[]string{"actions.killBIRD: placeholder {sig}: valid placeholders are {manifestDir}, {node}, {signal}"}},
		{"placeholder of another action", strings.Replace(good, "{signal}", "{felix}", 1), []string{"actions.killBIRD: placeholder {felix}"}},
		{"unknown action", good + "  reboot: x\n", []string{"reboot"}},
		{"bad protocol", "deviceRouteProtocol: 300\n" + good, []string{"deviceRouteProtocol: 300"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("lab.yaml", ".", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.yaml)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// Positive control: the base manifest is good.
	m, err := Parse("lab.yaml", ".", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if m.RouteProtocol() != 80 || !m.Has(ActionKillBIRD) || m.Has(ActionUpgrade) {
		t.Errorf("parsed %+v", m)
	}
	if got := m.Missing(ActionKillBIRD, ActionUpgrade, ActionStartBIRD); len(got) != 2 || got[0] != ActionUpgrade {
		t.Errorf("missing: %v", got)
	}
}

// The shipped examples are documentation: they must parse, and provide
// the actions the live-change and upgrade scenarios need.
func TestExamplesParse(t *testing.T) {
	names := Examples()
	if len(names) < 2 {
		t.Fatalf("examples: %v, want kind and vagrant", names)
	}
	for _, n := range names {
		m, err := Example(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if miss := m.Missing(ActionSetProgramClusterRoutes, ActionUpgrade, ActionKillBIRD, ActionStartBIRD); len(miss) > 0 {
			t.Errorf("%s: lacks %v", n, miss)
		}
		for _, nd := range m.Nodes {
			if len(nd.Workloads) == 0 || len(nd.Blocks) == 0 {
				t.Errorf("%s: node %s has no workload or no block", n, nd.Name)
			}
		}
	}
}

// Placeholders are filled in shell-quoted; a value an action needs but is
// not given is an error naming it.
func TestCommand(t *testing.T) {
	m, err := Parse("lab.yaml", "/labs/x", []byte(strings.Replace(good, "kill-bird {node} {signal}", "'{manifestDir}/kill {node} {signal}'", 1)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Command(ActionKillBIRD, map[string]string{"node": "n 1'x", "signal": "KILL"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `/labs/x/kill 'n 1'\''x' KILL`; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	if _, err := m.Command(ActionKillBIRD, map[string]string{"node": "n1"}); err == nil || !strings.Contains(err.Error(), "no value for {signal}") {
		t.Errorf("missing value: %v", err)
	}
	if _, err := m.Command(ActionUpgrade, nil); err == nil || !strings.Contains(err.Error(), "actions.upgrade: not provided") {
		t.Errorf("missing action: %v", err)
	}
	r, err := m.Run(context.Background(), ActionKillBIRD, map[string]string{"node": "n1", "signal": "KILL"})
	if err == nil || r.BeginMono == 0 || r.EndMono < r.BeginMono {
		t.Errorf("a command that cannot run: %v, %+v", err, r)
	}
}

// A container reference is resolved by its runtime's own command; a
// stand-in runtime on PATH answers as docker, crictl and runc do.
func TestResolveContainer(t *testing.T) {
	bin := t.TempDir()
	stand := map[string]string{
		"docker": `[ "$1 $2 $3 $4" = "inspect --format {{.State.Pid}} kw" ] && echo $$PPID_SELF || { echo "no such container" >&2; exit 1; }`,
		"crictl": `[ "$1" = inspect ] && [ "$6" = c1 ] && echo $$PPID_SELF`,
		"runc":   `[ "$1 $2 $3" = "--root /rr state" ] && echo '{"pid": '$PPID_SELF', "status": "'$4'"}'`,
	}
	for name, body := range stand {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+strings.ReplaceAll(body, "$$PPID_SELF", "$PPID_SELF")+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	self := strconv.Itoa(os.Getpid())
	t.Setenv("PPID_SELF", self)
	m, err := Parse("lab.yaml", ".", []byte("runtime: docker\nrunc"+"Root: /rr\n"+good))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		ref  NetnsRef
		want string
	}{
		{NetnsRef{Container: "kw"}, "/proc/" + self + "/ns/net"},
		{NetnsRef{Container: "c1", Runtime: "crictl"}, "/proc/" + self + "/ns/net"},
		{NetnsRef{Container: "running", Runtime: "runc"}, "/proc/" + self + "/ns/net"},
		{NetnsRef{Command: "echo " + self}, "/proc/" + self + "/ns/net"},
		{NetnsRef{Command: "echo /proc/" + self + "/ns/net"}, "/proc/" + self + "/ns/net"},
		{NetnsRef{Path: "/proc/self/ns/net"}, "/proc/self/ns/net"},
	} {
		got, err := m.Resolve(ctx, tc.ref)
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.ref, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		ref  NetnsRef
		want string
	}{
		{NetnsRef{Container: "gone"}, `container "gone": docker inspect`},
		{NetnsRef{Container: "stopped", Runtime: "runc"}, "runc says it is stopped, not running"},
		{NetnsRef{Command: "echo ns1"}, `printed "ns1": want a PID or an absolute path`},
		{NetnsRef{Path: "/nonexistent/ns"}, "network namespace /nonexistent/ns"},
	} {
		if _, err := m.Resolve(ctx, tc.ref); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want an error saying %q", tc.ref, err, tc.want)
		}
	}
}
