package results

import "testing"

func TestTableAlignsAndFormats(t *testing.T) {
	tb := NewTable("node", "lost", "gap ms")
	tb.Add("node-1", 3, 12.345)
	tb.Add("node-10", 0, Cellf("%.0f", 7.6))
	tb.Add("node-2")
	want := "node     lost  gap ms  \n" +
		"node-1   3     12.3    \n" +
		"node-10  0     8       \n" +
		"node-2   \n"
	if got := tb.String(); got != want {
		t.Errorf("table:\n%q\nwant\n%q", got, want)
	}
	if tb.Len() != 3 {
		t.Errorf("Len %d, want 3", tb.Len())
	}
	right := NewTable("a", "bb").AlignRight()
	right.Add(1, 22)
	if got, want := right.String(), "  a  bb\n  1  22\n"; got != want {
		t.Errorf("right-aligned:\n%q\nwant\n%q", got, want)
	}
}
