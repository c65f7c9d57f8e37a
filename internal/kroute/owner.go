package kroute

// Owner is who wrote a route, as its protocol says: the one reading of
// rtm_protocol every judge, view and report shares.
type Owner string

const (
	OwnerProgrammer Owner = "programmer" // the route programmer (Felix's deviceRouteProtocol)
	OwnerBIRD       Owner = "bird"       // BIRD's kernel protocol (proto bird, 12)
	OwnerOther      Owner = "other"      // anyone else: the kernel, an operator, another daemon
	OwnerNone       Owner = "none"       // no route at all
)

// OwnerOf is who wrote a route of protocol p, where programmer is the
// route programmer's protocol (0: Calico's default, 80). A programmer
// configured to write proto bird is read as the programmer: the
// configuration says so, and BIRD is then indistinguishable by protocol.
func OwnerOf(p, programmer Protocol) Owner {
	if programmer == ProtoUnspec {
		programmer = ProtoCalicoDefault
	}
	switch p {
	case programmer:
		return OwnerProgrammer
	case ProtoBIRD:
		return OwnerBIRD
	}
	return OwnerOther
}
