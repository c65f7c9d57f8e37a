package topo

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Manifest records what a build made, so another process (`birdcage
// status`, `exec`, `down`) can find a topology that outlives its builder.
type Manifest struct {
	RunID      string            `json:"runID"`
	Topology   *Topology         `json:"topology"`
	Namespaces map[string]string `json:"namespaces"` // topology name -> netns path
	Kept       bool              `json:"kept"`
}

// Manifest describes the built network.
func (n *Network) Manifest() Manifest {
	m := Manifest{RunID: n.Run.ID, Topology: n.Topology, Namespaces: map[string]string{}}
	for _, x := range n.allNamespaces() {
		m.Namespaces[x.Name] = x.Path
	}
	return m
}

// WriteManifest stores the manifest in the run dir.
func (n *Network) WriteManifest(kept bool) error {
	m := n.Manifest()
	m.Kept = kept
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := n.Run.Path("manifest.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return os.Rename(tmp, n.Run.Path("manifest.json"))
}

// ReadManifest loads a manifest written by WriteManifest.
func ReadManifest(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %q: %w", path, err)
	}
	return &m, nil
}

// Open opens the namespace with the given topology name.
func (m *Manifest) Open(name string) (ns.NetNS, error) {
	p, ok := m.Namespaces[name]
	if !ok {
		return nil, fmt.Errorf("run %s has no node, router, switch or workload named %q", m.RunID, name)
	}
	return ns.GetNS(p)
}
