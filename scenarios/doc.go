// Package scenarios holds birdcage's Ginkgo suites: one file per claim family
// of the cluster-route design, each opening with the claim it holds in place.
//
//	sudo go test ./scenarios                                  # everything this kernel can run
//	sudo go test ./scenarios -args -ginkgo.label-filter=ipip  # one family
//	sudo go test ./scenarios -args -ginkgo.junit-report=junit.xml
//
// Scenarios drive clusters only through harness/; they reach netlink
// directly only to assert a kernel fact.
package scenarios
