package confd

import (
	"bytes"
	_ "embed"
	"net/netip"
	"text/template"

	"github.com/birdcage/birdcage/dataplane/bird/release"
)

//go:embed bird16.conf.tmpl
var node16TemplateText string

var node16Template = template.Must(template.New("bird16.conf").Parse(node16TemplateText))

// renderTwoDaemons renders BIRD 1.x's two configs from the one view: bird
// gets the IPv4 pools, blocks and sessions, bird6 the IPv6 ones; both come
// from the same ownership policy.
func renderTwoDaemons(v view) (conf4, conf6 []byte, err error) {
	for _, fam := range []struct {
		daemon, family, unspec string
		is6                    bool
		out                    *[]byte
	}{{"bird", "ipv4", "0.0.0.0", false, &conf4}, {"bird6", "ipv6", "::", true, &conf6}} {
		fv := v
		fv.Daemon, fv.Family, fv.Unspecified = fam.daemon, fam.family, fam.unspec
		fv.Pools = nil
		for _, p := range v.Pools {
			if pfx, err := netip.ParsePrefix(p.CIDR); err == nil && pfx.Addr().Is6() == fam.is6 {
				fv.Pools = append(fv.Pools, p)
			}
		}
		fv.Blocks = v.Blocks4
		if fam.is6 {
			fv.Blocks = v.Blocks6
		}
		fv.Peers = nil
		for _, p := range v.Peers {
			if p.Family == fam.family {
				fv.Peers = append(fv.Peers, p)
			}
		}
		var buf bytes.Buffer
		if err := node16Template.Execute(&buf, fv); err != nil {
			return nil, nil, err
		}
		*fam.out = buf.Bytes()
	}
	return conf4, conf6, nil
}

// Daemons is what the node's BIRD is configured with: Config for 2.x and
// 3.x; for 1.x both daemons' configs joined (release.Bundle), which
// dataplane/bird splits between bird and bird6.
func (r Rendered) Daemons() []byte {
	if r.BIRD.TwoDaemons() {
		return release.Bundle(r.Config, r.Config6)
	}
	return r.Config
}
