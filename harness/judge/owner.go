package judge

// Owner is who wrote the cluster routes to a prefix, told by their
// protocol: nobody, the programmer, BIRD, or both. It is a set, so Both is
// ByProgrammer|ByBIRD — two routes side by side, or BIRD exporting a block
// whose write the kernel refused beside the programmer's route.
//
// In a matcher's ProgrammedBy, Nobody and Both constrain nothing: any
// forwarding route matches.
type Owner uint8

const (
	Nobody       Owner = 0
	ByProgrammer Owner = 1 << 0
	ByBIRD       Owner = 1 << 1
	Both               = ByProgrammer | ByBIRD
)

// OwnerOf is the owner set of a prefix the programmer writes (programmer)
// and BIRD writes (bird).
func OwnerOf(programmer, bird bool) Owner {
	var o Owner
	if programmer {
		o |= ByProgrammer
	}
	if bird {
		o |= ByBIRD
	}
	return o
}

// Has reports whether every owner in x is in o.
func (o Owner) Has(x Owner) bool { return x != Nobody && o&x == x }

func (o Owner) String() string {
	switch o {
	case Nobody:
		return "nobody"
	case ByProgrammer:
		return "the programmer"
	case ByBIRD:
		return "BIRD"
	case Both:
		return "both"
	}
	return "owner(?)"
}
