package bgphold

import (
	"net/netip"
	"testing"
)

// The hold's rules seen from the held node: the end that opened a
// connection is the one not on port 179.
func TestBGPHoldRuleMatchesTheConnectionByItsOpener(t *testing.T) {
	peer := netip.MustParseAddr("10.10.0.12")
	for _, tc := range []struct {
		rule        Rule
		chain, want string
	}{
		{Rule{FromPeer, PeerOpened, Open}, "in", "ip saddr 10.10.0.12 tcp dport 179 @ih,144,8 1"},
		{Rule{FromPeer, NodeOpened, Open}, "in", "ip saddr 10.10.0.12 tcp sport 179 @ih,144,8 1"},
		{Rule{ToPeer, PeerOpened, Open}, "out", "ip daddr 10.10.0.12 tcp sport 179 @ih,144,8 1"},
		{Rule{ToPeer, NodeOpened, Keepalive}, "out", "ip daddr 10.10.0.12 tcp dport 179 @ih,144,8 4"},
		{Rule{ToPeer, NodeOpened, TCPSyn}, "out", "ip daddr 10.10.0.12 tcp dport 179 tcp flags & (syn|ack) == syn"},
		{Rule{FromPeer, PeerOpened, TCPAfterSyn}, "in", "ip saddr 10.10.0.12 tcp dport 179 tcp flags & syn == 0"},
	} {
		chain, match := tc.rule.nft(peer)
		if chain != tc.chain || match != tc.want {
			t.Errorf("%s: got chain %q match %q, want %q %q", tc.rule, chain, match, tc.chain, tc.want)
		}
	}
}
