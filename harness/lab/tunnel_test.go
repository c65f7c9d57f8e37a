package lab

import "testing"

// The link lines are TakeSnapshot's format ("NAME type TYPE up|down mtu …").
func TestTunnelOf(t *testing.T) {
	for _, c := range []struct {
		links []string
		want  string
	}{
		{[]string{"lo type device up mtu 65536", "tunl0 type ipip up mtu 1480 master \"\" mac "}, "kernel"},
		{[]string{"tunl0-peer type veth up mtu 1480", "tunl0 type veth up mtu 1480 master \"\" mac 02:00:00:00:00:01"}, "ebpf"},
		// Controls: no tunl0, and names that only begin like it.
		{[]string{"eth0 type veth up mtu 1500"}, ""},
		{[]string{"tunl0-peer type veth up mtu 1480", "tunl0-fb type ipip down mtu 1480"}, ""},
		{nil, ""},
	} {
		if got := tunnelOf(Snapshot{Parts: map[string][]string{"links": c.links}}); got != c.want {
			t.Errorf("%q: %q, want %q", c.links, got, c.want)
		}
	}
}
