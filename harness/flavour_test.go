package harness

import (
	"context"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/calico/config"
)

func TestCalicoReleaseIsTheBinarysVersion(t *testing.T) {
	for v, want := range map[string]config.Release{
		"v3.33.0-0.dev-1478-g6609dea54713": config.R333,
		"v3.32.1-125-gde60d98e97a7":        config.R332,
		"v3.31.7-2-g3cdeae8f7ace":          config.R331,
		"":                                 config.R332, // unreadable: the default given
		"v9.1.0":                           config.R332,
	} {
		if got := calicoRelease(v, config.R332); got != want {
			t.Errorf("calicoRelease(%q) = %s, want %s", v, got, want)
		}
	}
}

func TestNodeCalicoPicksEachNodesSource(t *testing.T) {
	o := Options{Calico: "/all", NodeCalico: map[string]string{"node-2": "/two", "node-3": ""}}
	for node, want := range map[string]string{"node-1": "/all", "node-2": "/two", "node-3": ""} {
		if got := calicoSource(o, node); got != want {
			t.Errorf("calicoSource(%s) = %q, want %q", node, got, want)
		}
	}
	_, err := checkNodeCalico(context.Background(), Options{NodeCalico: map[string]string{"node-9": "/x"}}, []string{"node-1", "node-2"})
	if err == nil || !strings.Contains(err.Error(), `no node "node-9"`) {
		t.Errorf("a NodeCalico entry for a node the topology lacks: %v", err)
	}
	if _, err := checkNodeCalico(context.Background(), Options{}, []string{"node-1"}); err != nil {
		t.Errorf("no calico node at all: %v", err)
	}
}
