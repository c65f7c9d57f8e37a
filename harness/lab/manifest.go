package lab

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
)

// Manifest describes a lab: nodes birdcage did not create, where their
// network namespaces are, their workloads, and the commands that perform
// each action on them. A person should read one in ten seconds:
//
//	name: kind-calico
//	runtime: docker
//	pools: [192.168.0.0/16]
//	nodes:
//	  - name: kind-worker
//	    netns: {container: kind-worker}
//	    interfaces: [eth0]
//	    blocks: [192.168.110.0/26]
//	    workloads:
//	      - {name: probe-a, netns: {command: "..."}, interface: eth0, address: 192.168.110.2}
//	actions:
//	  setProgramClusterRoutes: kubectl patch felixconfiguration default ... {felix} ...
type Manifest struct {
	Name string `json:"name"`
	// Runtime is the default container runtime for `container:` references
	// (docker, podman, crictl, runc).
	Runtime string `json:"runtime,omitempty"`
	// RuncRoot is runc's --root (its state directory) for runc references.
	RuncRoot string `json:"runcRoot,omitempty"`
	// Pools are the cluster's IP pools: routes inside them are the cluster
	// routes the timelines record and the scenarios judge.
	Pools []string `json:"pools"`
	// DeviceRouteProtocol is the kernel route protocol the lab's route
	// programmer writes (Felix's deviceRouteProtocol; default 80). BIRD's
	// is 12.
	DeviceRouteProtocol int `json:"deviceRouteProtocol,omitempty"`
	// Datastore is optional read-only access to the cluster's datastore.
	Datastore *Datastore `json:"datastore,omitempty"`
	Nodes     []Node     `json:"nodes"`
	// Actions are shell commands (run with sh -c on this host) with
	// {placeholder}s; an action the manifest leaves out makes the
	// scenarios that need it skip, naming it.
	Actions Actions `json:"actions,omitempty"`

	source string // file name, for errors
	dir    string // the manifest's directory, for {manifestDir}
}

// Datastore is read-only access to a birdcage-format datastore directory
// (internal/calico/datastore): scenarios that only observe read blocks from it.
type Datastore struct {
	Dir string `json:"dir"`
}

// Node is one lab node.
type Node struct {
	Name  string   `json:"name"`
	Netns NetnsRef `json:"netns"`
	// Interfaces are the node's uplinks: probe counters are attached there
	// so a report can say where probes vanished (optional).
	Interfaces []string `json:"interfaces,omitempty"`
	// Blocks are the node's own address blocks (CIDRs inside a pool); the
	// other nodes' blocks are its remote blocks.
	Blocks    []string   `json:"blocks,omitempty"`
	Workloads []Workload `json:"workloads,omitempty"`
}

// Workload is a probe endpoint: a pod or a namespace with an address.
type Workload struct {
	Name      string   `json:"name"`
	Netns     NetnsRef `json:"netns"`
	Interface string   `json:"interface"`
	Address   string   `json:"address"`
}

// NetnsRef says where a network namespace is: exactly one of a path, a
// container (resolved to its PID by its runtime, then /proc/PID/ns/net),
// or a command printing a PID or a path.
type NetnsRef struct {
	Path      string `json:"path,omitempty"`
	Container string `json:"container,omitempty"`
	// Runtime overrides the manifest's default for this container.
	Runtime string `json:"runtime,omitempty"`
	// Command is run with sh -c; its output (trimmed) is a PID or a path.
	// For namespaces a runtime cannot name from the host (a pod inside a
	// kind node: /proc/<kind node PID>/root/proc/<pod PID>/ns/net).
	Command string `json:"command,omitempty"`
}

// Actions are the command templates. Placeholders, per action:
//
//	upgrade                  {node} {release} {signal}
//	setProgramClusterRoutes  {felix} {bgp}
//	killBIRD                 {node} {signal}
//	startBIRD                {node} {recovery}
//	birdc                    {node} {command}
//
// and {manifestDir} in every one. Values are substituted shell-quoted.
type Actions struct {
	Upgrade                 string `json:"upgrade,omitempty"`
	SetProgramClusterRoutes string `json:"setProgramClusterRoutes,omitempty"`
	KillBIRD                string `json:"killBIRD,omitempty"`
	StartBIRD               string `json:"startBIRD,omitempty"`
	// Birdc runs a birdc command ("show protocols") against a node's
	// BIRD and prints its answer: not an action on the lab but a look
	// into it, so scenarios can wait for BIRD's sessions as they do on
	// the built-in target.
	Birdc string `json:"birdc,omitempty"`
}

// Action names an action, as the manifest spells it.
type Action string

const (
	ActionUpgrade                 Action = "upgrade"
	ActionSetProgramClusterRoutes Action = "setProgramClusterRoutes"
	ActionKillBIRD                Action = "killBIRD"
	ActionStartBIRD               Action = "startBIRD"
	ActionBirdc                   Action = "birdc"
)

// placeholders each action may use (besides manifestDir).
var placeholders = map[Action][]string{
	ActionUpgrade:                 {"node", "release", "signal"},
	ActionSetProgramClusterRoutes: {"felix", "bgp"},
	ActionKillBIRD:                {"node", "signal"},
	ActionStartBIRD:               {"node", "recovery"},
	ActionBirdc:                   {"node", "command"},
}

// Runtimes are the container runtimes a `container:` reference may name.
var Runtimes = []string{"docker", "podman", "crictl", "runc"}

// Template is the action's command template ("" when the manifest has none).
func (a Actions) Template(act Action) string {
	switch act {
	case ActionUpgrade:
		return a.Upgrade
	case ActionSetProgramClusterRoutes:
		return a.SetProgramClusterRoutes
	case ActionKillBIRD:
		return a.KillBIRD
	case ActionStartBIRD:
		return a.StartBIRD
	case ActionBirdc:
		return a.Birdc
	}
	return ""
}

// Has reports whether the manifest provides every one of the actions.
func (m *Manifest) Has(acts ...Action) bool {
	return len(m.Missing(acts...)) == 0
}

// Missing lists those of acts the manifest does not provide.
func (m *Manifest) Missing(acts ...Action) []Action {
	var out []Action
	for _, a := range acts {
		if m.Actions.Template(a) == "" {
			out = append(out, a)
		}
	}
	return out
}

// Source is the file the manifest came from.
func (m *Manifest) Source() string { return m.source }

// Load reads and validates a lab manifest.
func Load(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lab manifest %q: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("lab manifest %q: %w", path, err)
	}
	return Parse(path, filepath.Dir(abs), b)
}

// Parse reads and validates a manifest; source names it in errors and dir
// is what {manifestDir} stands for.
func Parse(source, dir string, b []byte) (*Manifest, error) {
	var m Manifest
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		return nil, fmt.Errorf("lab manifest %q: %w", source, err)
	}
	m.source, m.dir = source, dir
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *Manifest) errorf(format string, args ...any) error {
	return fmt.Errorf("lab manifest %q: "+format, append([]any{m.source}, args...)...)
}

var (
	namePattern  = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$`)
	ifacePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._@-]{0,14}$`)
	placeholder  = regexp.MustCompile(`\{([a-zA-Z]*)\}`)
)

func (m *Manifest) validate() error {
	if m.Name == "" {
		return m.errorf("name: missing (a name for the lab, e.g. kind-calico)")
	}
	if m.Runtime != "" && !slices.Contains(Runtimes, m.Runtime) {
		return m.errorf("runtime: %q is not one of %s", m.Runtime, strings.Join(Runtimes, ", "))
	}
	if m.DeviceRouteProtocol < 0 || m.DeviceRouteProtocol > 255 {
		return m.errorf("deviceRouteProtocol: %d is not a kernel route protocol (0..255; Felix's default is 80)", m.DeviceRouteProtocol)
	}
	if len(m.Pools) == 0 {
		return m.errorf("pools: missing (the cluster's pool CIDRs, e.g. [192.168.0.0/16]: which routes are cluster routes)")
	}
	var pools []netip.Prefix
	for i, p := range m.Pools {
		pf, err := netip.ParsePrefix(p)
		if err != nil || pf != pf.Masked() {
			return m.errorf("pools[%d]: %q is not a CIDR (e.g. 192.168.0.0/16)", i, p)
		}
		pools = append(pools, pf)
	}
	if m.Datastore != nil && m.Datastore.Dir == "" {
		return m.errorf("datastore.dir: missing (a birdcage-format datastore directory, read only)")
	}
	if len(m.Nodes) == 0 {
		return m.errorf("nodes: missing (at least one node)")
	}
	names := map[string]string{}
	addrs := map[netip.Addr]string{}
	for i, n := range m.Nodes {
		where := fmt.Sprintf("nodes[%d]", i)
		if !namePattern.MatchString(n.Name) {
			return m.errorf("%s: name %q: want letters, digits, '.', '_' or '-'", where, n.Name)
		}
		where = fmt.Sprintf("node %q", n.Name)
		if prev, ok := names[n.Name]; ok {
			return m.errorf("%s: name used twice (also %s)", where, prev)
		}
		names[n.Name] = "node " + n.Name
		if err := m.validateRef(where+": netns", n.Netns); err != nil {
			return err
		}
		for j, ifn := range n.Interfaces {
			if !ifacePattern.MatchString(ifn) {
				return m.errorf("%s: interfaces[%d]: %q is not an interface name (at most 15 characters)", where, j, ifn)
			}
		}
		for j, b := range n.Blocks {
			pf, err := netip.ParsePrefix(b)
			if err != nil || pf != pf.Masked() {
				return m.errorf("%s: blocks[%d]: %q is not a CIDR", where, j, b)
			}
			if !insideAny(pf, pools) {
				return m.errorf("%s: blocks[%d]: %s is in none of the pools (%s)", where, j, b, strings.Join(m.Pools, ", "))
			}
		}
		for j, w := range n.Workloads {
			ww := fmt.Sprintf("%s: workloads[%d]", where, j)
			if !namePattern.MatchString(w.Name) {
				return m.errorf("%s: name %q: want letters, digits, '.', '_' or '-'", ww, w.Name)
			}
			ww = fmt.Sprintf("%s: workload %q", where, w.Name)
			if prev, ok := names[w.Name]; ok {
				return m.errorf("%s: name used twice (also %s)", ww, prev)
			}
			names[w.Name] = "a workload of node " + n.Name
			if err := m.validateRef(ww+": netns", w.Netns); err != nil {
				return err
			}
			if !ifacePattern.MatchString(w.Interface) {
				return m.errorf("%s: interface %q: want the workload's interface name (e.g. eth0)", ww, w.Interface)
			}
			a, err := netip.ParseAddr(w.Address)
			if err != nil {
				return m.errorf("%s: address %q: want an IP address (e.g. 192.168.110.2)", ww, w.Address)
			}
			if prev, ok := addrs[a]; ok {
				return m.errorf("%s: address %s is also workload %s's (probe flows are told apart by addresses)", ww, a, prev)
			}
			addrs[a] = w.Name
		}
	}
	for _, act := range []Action{ActionUpgrade, ActionSetProgramClusterRoutes, ActionKillBIRD, ActionStartBIRD, ActionBirdc} {
		tmpl := m.Actions.Template(act)
		allowed := append([]string{"manifestDir"}, placeholders[act]...)
		for _, sub := range placeholder.FindAllStringSubmatch(tmpl, -1) {
			if !slices.Contains(allowed, sub[1]) {
				return m.errorf("actions.%s: placeholder {%s}: valid placeholders are {%s}", act, sub[1], strings.Join(allowed, "}, {"))
			}
		}
	}
	return nil
}

func (m *Manifest) validateRef(where string, r NetnsRef) error {
	set := 0
	for _, s := range []string{r.Path, r.Container, r.Command} {
		if s != "" {
			set++
		}
	}
	if set != 1 {
		return m.errorf("%s: want exactly one of path (e.g. /var/run/netns/n1), container (resolved by a runtime) or command (prints a PID or a path); %d given", where, set)
	}
	if r.Runtime != "" && r.Container == "" {
		return m.errorf("%s: runtime %q without container", where, r.Runtime)
	}
	if r.Container != "" {
		rt := r.Runtime
		if rt == "" {
			rt = m.Runtime
		}
		if rt == "" {
			return m.errorf("%s: container %q: no runtime (set runtime here or at the top: %s)", where, r.Container, strings.Join(Runtimes, ", "))
		}
		if !slices.Contains(Runtimes, rt) {
			return m.errorf("%s: runtime %q is not one of %s", where, rt, strings.Join(Runtimes, ", "))
		}
	}
	if r.Path != "" && !filepath.IsAbs(r.Path) {
		return m.errorf("%s: path %q: want an absolute path (e.g. /var/run/netns/n1 or /proc/1234/ns/net)", where, r.Path)
	}
	return nil
}

func insideAny(p netip.Prefix, pools []netip.Prefix) bool {
	for _, pool := range pools {
		if pool.Bits() <= p.Bits() && pool.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// PoolPrefixes are the pools as prefixes (validated by Parse).
func (m *Manifest) PoolPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range m.Pools {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

// RouteProtocol is the protocol the lab's programmer writes.
func (m *Manifest) RouteProtocol() kroute.Protocol {
	return kroute.Protocol(config.EffectiveDeviceRouteProtocol(m.DeviceRouteProtocol))
}

// Node returns the named node.
func (m *Manifest) Node(name string) (*Node, bool) {
	for i := range m.Nodes {
		if m.Nodes[i].Name == name {
			return &m.Nodes[i], true
		}
	}
	return nil, false
}

// NodeNames lists the nodes in manifest order.
func (m *Manifest) NodeNames() []string {
	var out []string
	for _, n := range m.Nodes {
		out = append(out, n.Name)
	}
	return out
}
