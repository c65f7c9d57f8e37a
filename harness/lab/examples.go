package lab

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

// The example manifests (kind with calico-node, vagrant): documentation a
// test keeps parsing, not labs birdcage's own tests run.
//
//go:embed examples/*.yaml
var examples embed.FS

// Examples lists the example manifests' names.
func Examples() []string {
	ents, _ := examples.ReadDir("examples")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Example parses one example manifest.
func Example(name string) (*Manifest, error) {
	b, err := examples.ReadFile("examples/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("lab example %q: none; examples are %s", name, strings.Join(Examples(), ", "))
	}
	return Parse("examples/"+name+".yaml", ".", b)
}
