package topo

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestBuiltinsValidate(t *testing.T) {
	for _, name := range Builtins() {
		tp, err := Builtin(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := tp.Validate(); err != nil {
			t.Errorf("built-in %s does not validate: %v", name, err)
		}
	}
	if got := Builtins(); !reflect.DeepEqual(got, []string{"dualtor", "ipip", "noencap"}) {
		t.Errorf("built-ins = %v", got)
	}
}

// The generated shape and the shipped YAML must not drift apart.
func TestNoEncapGeneratorMatchesExample(t *testing.T) {
	ex, err := Builtin("noencap")
	if err != nil {
		t.Fatal(err)
	}
	gen := NoEncap(3, 2)
	gen.source = ex.source
	if !reflect.DeepEqual(ex, gen) {
		a, _ := ex.Marshal()
		b, _ := gen.Marshal()
		t.Errorf("NoEncap(3,2) differs from examples/noencap.yaml:\n%s\n---\n%s", a, b)
	}
}

func TestBlocksAllocatedInNodeOrder(t *testing.T) {
	tp, _ := Builtin("noencap")
	blocks, err := tp.allocateBlocks()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"node-1": "10.244.0.0/26", "node-2": "10.244.0.64/26", "node-3": "10.244.0.128/26"}
	for n, w := range want {
		if got := blocks[n][0].CIDR.String(); got != w {
			t.Errorf("%s block = %s, want %s", n, got, w)
		}
	}
}

func TestBadTopologies(t *testing.T) {
	base := `
name: bad
pools: [{name: p, cidr: 10.244.0.0/16}]
switches: [{name: lan}]
nodes:
  - name: n1
    interfaces: [{name: eth0, switch: lan, address: 10.0.0.1/24}]
`
	cases := []struct {
		name, yaml string
		features   Features
		want       []string // all must appear in the error
		is         error
	}{
		{name: "unknown field", yaml: base + "    colour: blue\n", want: []string{`topology "bad.yaml"`, "colour"}},
		{name: "duplicate node", yaml: base + "  - {name: n1, interfaces: [{name: eth0, switch: lan, address: 10.0.0.2/24}]}\n",
			want: []string{`node "n1"`, "duplicate name"}},
		{name: "peer to a missing node", yaml: base + "  - {name: n2, interfaces: [{name: eth0, peer: \"tor-c:eth1\", address: 10.0.1.2/24}]}\n",
			want: []string{`node "n2": interface "eth0": field peer: "tor-c" does not exist`}},
		{name: "switch that does not exist", yaml: base + "  - {name: n2, interfaces: [{name: eth0, switch: wan, address: 10.0.1.2/24}]}\n",
			want: []string{`field switch: "wan" does not exist; switches are lan`}},
		{name: "overlapping blocks", yaml: base + "    blocks: [10.244.1.0/26]\n  - {name: n2, blocks: [10.244.1.0/26], interfaces: [{name: eth0, switch: lan, address: 10.0.0.2/24}]}\n",
			want: []string{`node "n2": field blocks: 10.244.1.0/26 overlaps a block of node "n1"`}},
		{name: "block outside every pool", yaml: base + "    blocks: [10.99.0.0/26]\n",
			want: []string{`node "n1": field blocks: 10.99.0.0/26 is outside every pool (p 10.244.0.0/16)`}},
		{name: "block of the wrong size", yaml: base + "    blocks: [10.244.0.0/24]\n",
			want: []string{`is a /24; pool "p" has /26 blocks`}},
		{name: "ipip pool on a kernel without ipip", yaml: strings.Replace(base, "cidr: 10.244.0.0/16", "cidr: 10.244.0.0/16, ipipMode: Always", 1),
			features: Features{IPIP: false}, want: []string{`pool "p": field ipipMode: Always needs tunl0`}, is: ErrNoIPIP},
		{name: "bad ipipMode", yaml: strings.Replace(base, "cidr: 10.244.0.0/16", "cidr: 10.244.0.0/16, ipipMode: Sometimes", 1),
			features: Features{IPIP: true}, want: []string{`field ipipMode: "Sometimes" is not one of Always, CrossSubnet, Never`}},
		{name: "gateway outside the subnet", yaml: strings.Replace(base, "address: 10.0.0.1/24}", "address: 10.0.0.1/24, gateway: 10.9.9.9}", 1),
			want: []string{`field gateway: 10.9.9.9 is not inside the interface's subnet 10.0.0.1/24`}},
		{name: "one-sided peer", yaml: base + "  - {name: n2, interfaces: [{name: eth0, peer: \"n3:eth0\", address: 10.0.1.2/24}]}\n  - {name: n3, interfaces: [{name: eth0, switch: lan, address: 10.0.0.3/24}]}\n",
			want: []string{`field peer: "n3:eth0" must name "n2:eth0" as its peer too`}},
		{name: "node without an address", yaml: base + "  - {name: n2, interfaces: [{name: eth0, switch: lan}]}\n",
			want: []string{`node "n2": needs a node address`}},
		{name: "address used twice", yaml: base + "  - {name: n2, interfaces: [{name: eth0, switch: lan, address: 10.0.0.1/24}]}\n",
			want: []string{`node "n2": interface "eth0": field address: 10.0.0.1 is already the address of node "n1": interface "eth0" (field address); addresses must be unique`}},
		{name: "node address inside a pool", yaml: base + "  - {name: n2, interfaces: [{name: eth0, switch: lan, address: 10.244.3.2/24}]}\n",
			want: []string{`node "n2": interface "eth0": field address: 10.244.3.2 lies inside pool "p" (10.244.0.0/16), which is for pods`}},
		{name: "loopback inside a pool", yaml: base + "    loopback: 10.244.9.9/32\n",
			want: []string{`node "n1": field loopback: 10.244.9.9 lies inside pool "p"`}},
		{name: "pools that overlap", yaml: strings.Replace(base, "pools: [{name: p, cidr: 10.244.0.0/16}]", "pools: [{name: p, cidr: 10.244.0.0/16}, {name: q, cidr: 10.244.128.0/17}]", 1),
			want: []string{`pool "q": field cidr: 10.244.128.0/17 overlaps pool "p" (10.244.0.0/16)`}},
		{name: "loopback range as a pool", yaml: strings.Replace(base, "cidr: 10.244.0.0/16", "cidr: 127.0.0.0/16", 1),
			want: []string{`pool "p": field cidr: 127.0.0.0/16 is not a pod range: it overlaps the loopback range`}},
		{name: "link-local range as a pool", yaml: strings.Replace(base, "cidr: 10.244.0.0/16", "cidr: 169.254.0.0/16", 1),
			want: []string{`is not a pod range: it overlaps the link-local range`}},
		{name: "the whole address space as a pool", yaml: strings.Replace(base, "cidr: 10.244.0.0/16", "cidr: 0.0.0.0/0", 1),
			want: []string{`is not a pod range: it is the whole address space`}},
		{name: "pool name that is not a plain name", yaml: strings.Replace(base, "{name: p,", "{name: \"Pods/1\",", 1),
			want: []string{`pool "Pods/1": field name: use lower-case letters, digits and dashes`}},
		{name: "node name that is not a plain name", yaml: strings.Replace(base, "- name: n1", "- name: \"N 1\"", 1),
			want: []string{`node "N 1": field name: use lower-case letters, digits and dashes`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp, err := Parse("bad.yaml", []byte(c.yaml))
			if err == nil {
				f := c.features
				if f == (Features{}) && c.is == nil {
					f.IPIP = true
				}
				err = tp.ValidateFor(f)
			}
			if err == nil {
				t.Fatalf("no error for:\n%s", c.yaml)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not say %q", err, w)
				}
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %q is not %v", err, c.is)
			}
		})
	}
}
