package nsutil_test

// Routes with no filter lists every route (the CLI's `status` and
// `routes` ask for that): netlink v1.3.1 dereferences a nil filter, so
// this held `birdcage routes` on a kept run in place after it panicked.

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/testenv"
)

func TestRoutesWithoutFilter(t *testing.T) {
	n := testenv.NewNetNS(t, "routes")
	n.Veth(t, "r0", "r1", "10.98.0.1/24")
	rs, err := nsutil.Routes(n.Handle, netlink.FAMILY_ALL, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Dst != nil && r.Dst.String() == "10.98.0.0/24" {
			return
		}
	}
	t.Errorf("no connected route 10.98.0.0/24 among %d routes: %v", len(rs), rs)
}
