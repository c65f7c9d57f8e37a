package topo

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed examples/*.yaml
var examples embed.FS

// Load reads a topology from a YAML file. Unknown fields and duplicate keys
// are errors that name the file.
func Load(path string) (*Topology, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("topology %q: %w", path, err)
	}
	return Parse(path, b)
}

// Parse reads a topology from YAML; source names it in errors.
func Parse(source string, b []byte) (*Topology, error) {
	var t Topology
	if err := yaml.UnmarshalStrict(b, &t); err != nil {
		return nil, fmt.Errorf("topology %q: %w", source, err)
	}
	t.source = source
	if t.Name == "" {
		t.Name = strings.TrimSuffix(filepath.Base(source), filepath.Ext(source))
	}
	return &t, nil
}

// Builtin returns one of the built-in topologies by name; they are the YAML
// files in examples/, so what a user reads there is what runs.
func Builtin(name string) (*Topology, error) {
	b, err := examples.ReadFile("examples/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("topology %q: not a built-in topology; built-ins are %s, or give a YAML file path", name, strings.Join(Builtins(), ", "))
	}
	return Parse(name+".yaml", b)
}

// Builtins lists the built-in topology names.
func Builtins() []string {
	ents, _ := examples.ReadDir("examples")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// Resolve takes a built-in name, a YAML path, or a generated spec
// ("generated:nodes=50,fabric=dualtor,racks=5").
func Resolve(nameOrPath string) (*Topology, error) {
	if spec, ok := strings.CutPrefix(nameOrPath, GeneratedPrefix); ok {
		g, err := ParseGenSpec(spec)
		if err != nil {
			return nil, err
		}
		return Generate(g)
	}
	if strings.ContainsAny(nameOrPath, "/.") {
		return Load(nameOrPath)
	}
	return Builtin(nameOrPath)
}

// Marshal renders a topology as YAML.
func (t *Topology) Marshal() ([]byte, error) { return yaml.Marshal(t) }
