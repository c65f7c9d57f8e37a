// Package confd is birdcage's confd equivalent: it renders one node's BIRD 2
// configuration from the cluster datastore, the way Calico's confd renders
// bird.cfg and bird_ipam.cfg from its templates, and it renders the plain
// eBGP configuration of a router (a ToR) that is not a cluster node.
//
// Who programs a pool's cluster routes comes only from
// BGPConfiguration.programClusterRoutes resolved through dataplane/config
// (config.Resolve with config.BIRD), so the renderer and the route
// programmer share one enum, one default table and one unknown-value rule.
// Both address families are rendered into one BIRD 2 instance from that one
// policy, keyed on each pool's ipipMode, never on its IP version.
//
// It writes text only: running BIRD is harness/bird's job, and it must not
// know about namespaces, containers or scenarios.
package confd
