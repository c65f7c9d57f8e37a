package kroute

import "testing"

func TestOwnerOf(t *testing.T) {
	for _, c := range []struct {
		p, programmer Protocol
		want          Owner
	}{
		{ProtoCalicoDefault, 0, OwnerProgrammer},
		{ProtoCalicoDefault, ProtoCalicoDefault, OwnerProgrammer},
		{ProtoBIRD, 0, OwnerBIRD},
		{ProtoBIRD, 99, OwnerBIRD},
		{99, 99, OwnerProgrammer},
		{ProtoCalicoDefault, 99, OwnerOther}, // 80 is nobody's when the programmer writes 99
		{ProtoStatic, 0, OwnerOther},
		{ProtoKernel, 0, OwnerOther},
		{ProtoBIRD, ProtoBIRD, OwnerProgrammer},
	} {
		if got := OwnerOf(c.p, c.programmer); got != c.want {
			t.Errorf("OwnerOf(%s, %s) = %s, want %s", c.p, c.programmer, got, c.want)
		}
	}
}
