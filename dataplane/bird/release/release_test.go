package release

import (
	"bytes"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	if n, err := Parse(""); err != nil || n != Default {
		t.Errorf(`Parse("") = %q, %v; want the default %q`, n, err, Default)
	}
	for _, n := range All {
		if got, err := Parse(string(n)); err != nil || got != n {
			t.Errorf("Parse(%q) = %q, %v", n, got, err)
		}
	}
	if _, err := Parse("2.1"); err == nil || !strings.Contains(err.Error(), "1.6, 2.0, 2.17, 3.1") {
		t.Errorf("unknown release: err %v, want one listing the known releases", err)
	}
	for n, want := range map[Name]int{BIRD16: 1, BIRD20: 2, BIRD217: 2, BIRD31: 3} {
		if n.Major() != want {
			t.Errorf("%s: major %d, want %d", n, n.Major(), want)
		}
	}
	for n, want := range map[Name]bool{BIRD16: false, BIRD20: true, BIRD217: true, BIRD31: false} {
		if got, why := n.TunnelRoutes(); got != want || (!got && !strings.Contains(why, string(n)) && !strings.Contains(why, "1.6")) {
			t.Errorf("%s: tunnel routes %v (%q), want %v with a reason naming the release", n, got, why, want)
		}
	}
}

func TestBundle(t *testing.T) {
	c4, c6 := []byte("router id 1.1.1.1;\n"), []byte("router id 1.1.1.1;\nprotocol device {}\n")
	g4, g6, ok := Split(Bundle(c4, c6))
	if !ok || !bytes.Equal(g4, c4) || !bytes.Equal(g6, c6) {
		t.Fatalf("Split(Bundle) = %q, %q, %v", g4, g6, ok)
	}
	if _, _, ok := Split(c4); ok {
		t.Fatal("a single config split as a bundle")
	}
}
