package main

import (
	"strings"
	"testing"
)

// The two recorded sides of the model-vs-real table (testdata/results/README.md).
const (
	conformanceModel  = "../../testdata/results/conformance-model.json"
	conformanceCalico = "../../testdata/results/conformance-calico.json"
)

func TestConformanceTable(t *testing.T) {
	out, code := cli(t, nil, "conformance", conformanceModel, conformanceCalico)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var model, calico int
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(l, " | model | "):
			model++
		case strings.Contains(l, " | Calico | "):
			calico++
		}
	}
	if model < 12 || model != calico {
		t.Errorf("%d model lines and %d Calico lines: want one each per case, at least 12\n%s", model, calico, out)
	}
	// The sides swapped: each row's node ran the other flavour, which is
	// bad input naming the row.
	if out, code := cli(t, nil, "conformance", conformanceCalico, conformanceModel); code != 2 || !strings.Contains(out, "ran the calico flavour, but this side of the table is model") {
		t.Errorf("sides swapped: exit %d (want 2) naming the flavour\n%s", code, out)
	}
	if out, code := cli(t, nil, "conformance", conformanceModel, "no-such-results.json"); code != 2 || !strings.Contains(out, "no-such-results.json") {
		t.Errorf("a missing file: exit %d (want 2) naming it\n%s", code, out)
	}
}
