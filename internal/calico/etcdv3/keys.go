package etcdv3

import (
	"fmt"
	"net/netip"
	"strings"
)

// Calico's etcdv3 key layout, as libcalico-go/lib/backend/model builds it
// (resource.go ResourceKey.defaultPath, block.go BlockKey.defaultPath,
// block_affinity.go BlockAffinityKey.defaultPath, ipam_handle.go
// IPAMHandleKey.defaultPath), the same at release-v3.31 @ 3cdeae8f7ace,
// release-v3.32 @ de60d98e97a7 and release-v3.33 @ 6609dea54713.
const (
	// ResourcePrefix holds every projectcalico.org/v3 resource:
	// <prefix>/<plural>/<name>, or <prefix>/<plural>/<namespace>/<name> for a
	// namespaced kind.
	ResourcePrefix = "/calico/resources/v3/projectcalico.org"
	// IPAMPrefix holds blocks, block affinities and handles.
	IPAMPrefix = "/calico/ipam/v2"
)

// Plurals of the resources the writer stores (resource.go init, where the
// plural is lower-cased).
const (
	PluralIPPool             = "ippools"
	PluralNode               = "nodes"
	PluralFelixConfiguration = "felixconfigurations"
	PluralBGPConfiguration   = "bgpconfigurations"
	PluralBGPPeer            = "bgppeers"
	PluralWorkloadEndpoint   = "workloadendpoints"
	PluralProfile            = "profiles"
	PluralClusterInformation = "clusterinformations"
)

// ResourceKey is the key of a global resource (namespace "") or of a
// namespaced one.
func ResourceKey(plural, namespace, name string) string {
	if namespace == "" {
		return fmt.Sprintf("%s/%s/%s", ResourcePrefix, plural, name)
	}
	return fmt.Sprintf("%s/%s/%s/%s", ResourcePrefix, plural, namespace, name)
}

// cidrSegment is a masked prefix with its "/" written as "-"
// ("10.65.0.0/26" → "10.65.0.0-26"), as every IPAM key spells a CIDR.
func cidrSegment(p netip.Prefix) string {
	return strings.Replace(p.Masked().String(), "/", "-", 1)
}

func ipVersion(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 4
	}
	return 6
}

// BlockKey is the key of an IPAM allocation block:
// /calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26.
func BlockKey(block netip.Prefix) string {
	return fmt.Sprintf("%s/assignment/ipv%d/block/%s", IPAMPrefix, ipVersion(block), cidrSegment(block))
}

// BlockAffinityKey is the key of a host's affinity to a block:
// /calico/ipam/v2/host/node-1/ipv4/block/10.65.0.0-26 (affinity type
// "host", the only one birdcage writes).
func BlockAffinityKey(node string, block netip.Prefix) string {
	return fmt.Sprintf("%s/host/%s/ipv%d/block/%s", IPAMPrefix, node, ipVersion(block), cidrSegment(block))
}

// HandleKey is the key of an IPAM handle: /calico/ipam/v2/handle/<id>.
func HandleKey(id string) string {
	return fmt.Sprintf("%s/handle/%s", IPAMPrefix, id)
}
