// Package calico is the home of the Calico model that both route
// programmers read: config (what each programClusterRoutes value means, the
// release defaults) and datastore (pools, nodes, blocks, workloads, peers,
// FelixConfiguration and BGPConfiguration). The Felix-like programmer
// (dataplane/) and the confd-like renderer (dataplane/confd) both import it,
// and neither owns it.
package calico
