package results

import (
	"fmt"
	"sort"
	"strings"
)

// FigureKind is what a figure measures, which decides how `birdcage
// compare` judges it. Every figure the suite registers has its kind
// declared in figureKinds (by name) or figureKindRules (dynamic names);
// a row records its figures' kinds (ScenarioResult.FigureKinds) so the
// judgement never depends on how a figure happens to be named.
type FigureKind string

const (
	// KindGap: milliseconds without delivery or without a route. Worse is
	// longer; judged by the gap threshold (and the ratio).
	KindGap FigureKind = "gap"
	// KindLoss: probes lost. Worse is more; judged by the loss threshold
	// (and the ratio).
	KindLoss FigureKind = "loss"
	// KindCount: events that are bad when they grow (deletes of remote
	// blocks, prefixes with two routes, refused writes, flaps, steps with
	// a peer without a route). Judged by the count threshold (default: any
	// increase) and the ratio.
	KindCount FigureKind = "count"
	// KindDuration: an observed time that is not a gap: how long a spec
	// watched, a convergence or reaction time, a rollout. Judged by the
	// ratio only, when one is given.
	KindDuration FigureKind = "duration"
	// KindSize: how many things were checked, probed or configured, and
	// the settings and fitted parameters a spec reports. Neutral: never
	// judged (a difference is a remark).
	KindSize FigureKind = "size"
	// KindMachine: the platform's own noise or footprint (platform loss
	// on control flows, the sender's own pauses, RSS, CPU, memory, kernel
	// drops). Never judged (a difference is a remark).
	KindMachine FigureKind = "machine"
)

// FigureKinds lists every kind.
var FigureKinds = []FigureKind{KindGap, KindLoss, KindCount, KindDuration, KindSize, KindMachine}

// Valid says whether k is one of FigureKinds.
func (k FigureKind) Valid() bool {
	for _, x := range FigureKinds {
		if k == x {
			return true
		}
	}
	return false
}

// figureKinds declares every figure name the suite registers (scenarios/,
// harness's figure helpers) with its kind. A name a spec builds with a
// qualifier (a node, a step, a signal: "node.node-2.lostOut",
// "SIGTERM noRouteWindowsNode2", "spaced.lostIn") takes the kind of the
// declared name it qualifies (see KindOfFigure); names built from a
// prefix or a suffix are in figureKindRules.
var figureKinds = map[string]FigureKind{
	// harness: probe totals (results.AddProbeFigures), restarts
	// (harness/figures.go), handovers (harness/judge/handover.go).
	"lostProbes":                    KindLoss,
	"longestProbeGapMs":             KindGap,
	"senderPauseInGapMs":            KindMachine, // the sender's own stall, not the network
	"lateProbes":                    KindSize,    // reordering follows a path change: remarked, not judged
	"duplicateProbes":               KindCount,
	"maxReorderDepth":               KindSize,
	"programmerRestartMsMax":        KindDuration,
	"programmerToFirstProgramMsMax": KindDuration,
	"longestNoRouteWindowMs":        KindGap,

	// Gaps: ms without delivery or without a route.
	"gapMs":                            KindGap,
	"inboundLongestGapMs":              KindGap,
	"outboundLongestGapMs":             KindGap,
	"otherLongestGapMs":                KindGap,
	"longestGapMedianPerStepMs":        KindGap,
	"longestPeerNoRouteMs":             KindGap,
	"upgradeLongestNoRouteWindowMs":    KindGap,
	"upgradeNoRouteWindowMs":           KindGap,
	"upgradeNoRouteWindowMsMin":        KindGap,
	"upgradeNoRouteWindowMsMedian":     KindGap,
	"upgradeNoRouteWindowMsMax":        KindGap,
	"upgradeLongestGapMs":              KindGap,
	"downgradeLongestGapMs":            KindGap,
	"downgradeLongestNoRouteWindowMs":  KindGap,
	"longestGapOutboundMs":             KindGap,
	"longestGapMs":                     KindGap,
	"longestNoRouteMs":                 KindGap,
	"peerLongestNoRouteMs":             KindGap,
	"longestNoRouteMsNode2":            KindGap,
	"peersLongestNoRouteMs":            KindGap,
	"BIRDToprogrammerLongestNoRouteMs": KindGap,
	"programmerToBIRDLongestNoRouteMs": KindGap,

	// Loss: probes lost (or never seen).
	"lost":                              KindLoss,
	"inboundLost":                       KindLoss,
	"outboundLost":                      KindLoss,
	"lostInboundUpgraded":               KindLoss,
	"lostOutboundUpgraded":              KindLoss,
	"lostInboundUpgradedNode":           KindLoss,
	"lostOutboundUpgradedNode":          KindLoss,
	"lostSample":                        KindLoss,
	"lostIn":                            KindLoss,
	"lostOut":                           KindLoss,
	"upgradeLostOutboundUpgradedNode":   KindLoss,
	"upgradeLostInboundUpgradedNode":    KindLoss,
	"upgradeLostOtherFlows":             KindLoss,
	"downgradeLostOutboundUpgradedNode": KindLoss,
	"downgradeLostInboundUpgradedNode":  KindLoss,
	"downgradeLostOtherFlows":           KindLoss,
	"BIRDToprogrammerLost":              KindLoss,
	"programmerToBIRDLost":              KindLoss,

	// Counts: events that are bad when they grow.
	"deletesOfRemoteBlocks":     KindCount,
	"deletesAtUpgradedNode":     KindCount,
	"noRouteWindows":            KindCount,
	"prefixesWithTwoRoutes":     KindCount,
	"blocksWithNoRouteWindow":   KindCount,
	"stepsWithPeerWithoutRoute": KindCount,
	// scenarios/collision_test.go: the connection collision during a
	// restarted BIRD's graceful-restart recovery.
	"collisionSessionReset":                     KindCount,
	"restartedPersistedRoutesDeleted":           KindCount,
	"peerNoRouteToRestartedMs":                  KindGap,
	"restartedNoRouteToPeerMs":                  KindGap,
	"lostPeerToRestarted":                       KindLoss,
	"lostRestartedToPeer":                       KindLoss,
	"collisionBothConnections":                  KindSize, // how the spec staged it
	"peerConnectAttempts":                       KindSize,
	"restartedConnectAttempts":                  KindSize,
	"gracefulRestartRecoveryMs":                 KindDuration,
	"farNodeLessPathsMs":                        KindGap,
	"farNodeNoRouteMs":                          KindGap,
	"peerNoRouteWindowsDuringRecovery":          KindCount,
	"lostToRestarted":                           KindLoss,
	"peersWithoutRoute":                         KindCount,
	"birdWritesRefused":                         KindCount,
	"kernelRefusedBIRDRoutes":                   KindCount,
	"doubleProgrammedBIRDRefusedWrites":         KindCount,
	"doubleProgrammedOwnerChanges":              KindCount,
	"doubleProgrammedRouteEvents":               KindCount,
	"doubleProgrammedTakenBackAtWindowEnd":      KindCount,
	"birdRouteEvents":                           KindCount,
	"programmerRouteEvents":                     KindCount,
	"componentSwitches":                         KindCount,
	"steadySwitches":                            KindCount,
	"node2RouteEventsAfterWithdrawal":           KindCount,
	"readvertisementsSteady":                    KindCount,
	"readvertisementsAfterWithdrawal":           KindCount,
	"sameSubnetReadvertisementsSteady":          KindCount, // CrossSubnet's eth0 half, from 3.32 in the steady state
	"bestRouteIsPeersReadvertisementSteady":     KindCount,
	"sameSubnetReadvertisementsAfterWithdrawal": KindCount, // CrossSubnet's eth0 re-advertisement gap
	"remoteBlocksOwnedByOthersAfterDowngrade":   KindCount,
	"peerNoRouteWindows":                        KindCount,
	"inboundLostInPeerNoRouteWindows":           KindLoss,
	"downgradeLeftoverRoutes":                   KindCount, // varies between runs (BIRD's scan race); compare medians over repeats
	"upgradeLeftoverRoutes":                     KindCount, // no-encap 3.31 → 3.33: the old BIRD's metric-0 route beneath the new one
	"straysLeft":                                KindCount,
	"flowsWithLoss":                             KindCount,
	"noRouteWindowsNode2":                       KindCount,

	// Durations: observed times that are not gaps.
	"windowMs":                               KindDuration, // how long the spec watched
	"windowMsMax":                            KindDuration, // the matrix rows' observation windows
	"allDeliveringMs":                        KindDuration,
	"convergedMs":                            KindDuration,
	"secondsToConverged":                     KindDuration,
	"recoveryToConvergedMs":                  KindDuration,
	"handoverSeconds":                        KindDuration,
	"rollingUpgradeSeconds":                  KindDuration,
	"rolloutSeconds":                         KindDuration,
	"upgradeSeconds":                         KindDuration,
	"downgradeSeconds":                       KindDuration,
	"secondsPerNodeMax":                      KindDuration,
	"secondsPerNodeMedian":                   KindDuration,
	"settleMsMax":                            KindDuration,
	"programmerSyncedMsMax":                  KindDuration,
	"birdReconfiguredMsMax":                  KindDuration,
	"controlDeleteAckMs":                     KindDuration,
	"controlDeleteAfterWithdrawalMs":         KindDuration,
	"node2BIRDWithdrawalSeenByHarnessMs":     KindDuration,
	"earlyStrayRemovedAfterMigrationMs":      KindDuration,
	"strayRemovedAfterMigrationMs":           KindDuration,
	"lateStrayRemovedAfterMs":                KindDuration,
	"lateStrayPlantedAfterProgrammerStartMs": KindDuration,
	"firstSyncAfterMigrationMs":              KindDuration,
	"slowestStrayRemovalMs":                  KindDuration,
	"slowestStrayRemovalRefreshIntervals":    KindDuration,
	"ownProtocolFixtureRemovedAfterMs":       KindDuration,
	"lastRouteFellBackMsAfterFailure":        KindDuration,
	"BIRDToprogrammerSettledMs":              KindDuration,
	"programmerToBIRDSettledMs":              KindDuration,
	"fitInterceptMs":                         KindDuration,
	"fitResidualRMSMs":                       KindDuration,
	"fitMaxAbsResidualMs":                    KindDuration,
	"fitAboveReactInterceptMs":               KindDuration,
	"fitAboveReactResidualRMSMs":             KindDuration,
	"noRouteFitInterceptMs":                  KindDuration,

	// Sizes: what was checked, probed or configured; settings; fitted
	// parameters. Neutral.
	"answer":               KindSize,
	"addsBesideBIRD":       KindSize, // kernel-metric knob: expected at a metric other than the programmer's
	"replacesToProgrammer": KindSize, // kernel-metric knob: expected at the programmer's metric
	"mostRoutesAtOnce":     KindSize, // kernel-metric knob: 2 is the point at metric 32
	"birdKernelMetric":     KindSize,
	// BIRD taking routes back from the programmer before the cluster
	// routes stood still (quiesce_test.go): a race of peers' BGP updates
	// against the programmers' writes, 3-18 a run; reported, not judged.
	"birdWritesBeforeRoutesStoodStill":         KindSize,
	"roundsUntilRoutesStoodStill":              KindSize,
	"bgpValuesChecked":                         KindSize,
	"remoteBlocks":                             KindSize,
	"families":                                 KindSize,
	"lateStrays":                               KindSize,
	"crossSubnetRoutes":                        KindSize,
	"sameSubnetRoutes":                         KindSize,
	"nodesRoutingTheBorrowedAddress":           KindSize,
	"ceaseWithdrawalsOnNodesNotYetUpgraded":    KindSize, // the SIGTERM entry's control
	"attempt":                                  KindSize, // the suite self-test's repeated spec
	"injectedTakeoverGapMs":                    KindSize, // the gate check's fault
	"outboundFlowsFailingTheProbeJudge":        KindSize, // the gate check: the more the better
	"nodes":                                    KindSize,
	"pairs":                                    KindSize,
	"supportedPairs":                           KindSize, // matrix rows per expected class
	"doubleProgrammedPairs":                    KindSize,
	"unprogrammedPairs":                        KindSize,
	"flows":                                    KindSize,
	"flowsPerStep":                             KindSize,
	"flowsDelivering":                          KindSize,
	"flowsLeavingByBothPlanes":                 KindSize,
	"sentProbes":                               KindSize,
	"probeRate":                                KindSize,
	"bgpHoldTimeS":                             KindSize,
	"bgpKeepaliveTimeS":                        KindSize,
	"holdExpiryWindowLowMs":                    KindSize, // the window the hold timer predicts
	"holdExpiryWindowHighMs":                   KindSize,
	"birdScanTimeMs":                           KindSize,
	"routeRefreshIntervalMs":                   KindSize,
	"deviceRouteProtocol":                      KindSize,
	"boundMs":                                  KindSize,
	"budgetMs":                                 KindSize,
	"interceptBoundMs":                         KindSize,
	"slopeTolerance":                           KindSize,
	"fitSlope":                                 KindSize,
	"fitR2":                                    KindSize,
	"fitAboveReactSlope":                       KindSize,
	"noRouteFitSlope":                          KindSize,
	"noRouteFitR2":                             KindSize,
	"iBGPPeers":                                KindSize,
	"iBGPExportsChecked":                       KindSize,
	"eBGPExportsChecked":                       KindSize,
	"exportsToEBGP":                            KindSize, // eBGP peers do receive them
	"otherBlocksExportedSteady":                KindSize, // exports to eBGP, by decision
	"programmerRoutesExportedSteady":           KindSize,
	"ownKernelRouteBestSteady":                 KindSize, // dualtor: both ToRs prefer the node's own re-export
	"programmerRoutesExportedAfterWithdrawal":  KindSize,
	"ipv6RemoteBlocks":                         KindSize,
	"ipv6IPIPBlocksWithAKernelRoute":           KindSize,
	"remoteBlocksIPv4":                         KindSize,
	"remoteBlocksIPv6":                         KindSize,
	"remoteBlocksOwnedByBIRDAfterDowngrade":    KindSize,
	"remoteIPIPBlockRoutes":                    KindSize,
	"multipathRemoteBlocks":                    KindSize,
	"singlePathRemoteBlocks":                   KindSize,
	"torBestRoutesViaNonOwner":                 KindCount,
	"torBlockRoutesChecked":                    KindSize,
	"multipathRoutes":                          KindSize,
	"singlePathRoutes":                         KindSize,
	"nexthops":                                 KindSize,
	"nexthopsOnlink":                           KindSize,
	"nexthopsViaNodeAddress":                   KindSize,
	"nexthopsViaToRAddress":                    KindSize,
	"torNodeAddressPairs":                      KindSize,
	"torRoutesToNodeAddresses":                 KindSize,
	"doubleProgrammedBlocksWithOneKernelRoute": KindSize,
	"traceBIRDAddsEnabledEnabled":              KindSize,
	"traceProgrammerAddsEnabledEnabled":        KindSize,
	"controlSwitches":                          KindSize, // a positive control: expected ≥ 1
	"controlWarningsNode1":                     KindSize, // a positive control
	"rendersNode1":                             KindSize,
	"fullResyncsObserved":                      KindSize,
	"resyncsBeforeLateStray":                   KindSize,
	"node2ToNode3SentByEndMark":                KindSize,
	"peersWithoutSessionAtSecondKill":          KindSize, // the hazard's setup

	// What encap.CheckIPIP judged (issue 28): the IPIP
	// flows and their packets counted inside IPIP on the source's underlay.
	"ipipFlowsEncapsulated":      KindSize,
	"ipipInnerPacketsOnUnderlay": KindSize,
	// Bare packets of the flows into the upgraded node: after a Cease its
	// peers route them by their default route, un-encapsulated.
	"ipipBarePacketsInboundUpgradedNode": KindCount,

	// Machine: the platform's noise and footprint. Never judged.
	"platformLostPerControlFlowMax":        KindMachine,
	"platformMissingPerControlFlowMax":     KindMachine,
	"upgradePlatformLostPerControlFlowMax": KindMachine,
	"platformLongestOutageMs":              KindMachine,
	"softnetDropped":                       KindMachine,
	"confdReactMsMax":                      KindMachine, // the harness's render and BIRD's configure
	"harnessCPUPerSecondMax":               KindMachine,
	"harnessCPUPerSecondMedian":            KindMachine,
	"memAvailableBytesAtEnd":               KindMachine,
	"rssBIRDBytes":                         KindMachine,
	"rssHarnessBytes":                      KindMachine,
	"rssProgrammerBytes":                   KindMachine,
	"bpfCountersPerSession":                KindMachine,
	"bpfMapBytesPerSession":                KindMachine,
}

// figureKindRule declares the kind of names built from a fixed prefix
// and/or suffix around a variable part (a node, a flow, an ordering, a
// step number): a name matches when it begins with Prefix, ends with
// Suffix and is longer than both.
type figureKindRule struct {
	Prefix, Suffix string
	Kind           FigureKind
}

// figureKindRules are the dynamic names, in the order they are tried.
var figureKindRules = []figureKindRule{
	// Handovers per ordering (harness/judge/handover.go): which ordering a
	// handover takes is a race; the windows it opens are judged, as gaps
	// (longestNoRouteWindowMs).
	{Prefix: "handovers: ", Kind: KindSize},
	{Prefix: "lost ", Kind: KindLoss},    // per flow
	{Prefix: "missing ", Kind: KindLoss}, // per flow
	{Prefix: "birdDeletesRefused ", Kind: KindCount},
	{Prefix: "birdDeletesAccepted ", Kind: KindSize}, // a BIRD deleting its own route (coexisting routes)
	{Prefix: "routeRequestsAfterWithdrawal ", Kind: KindCount},
	{Prefix: "routeEventsAfterWithdrawal ", Kind: KindCount},
	{Prefix: "remoteBlocks ", Kind: KindSize}, // per ownership class
	{Prefix: "platformLostPerControlFlowMax.", Kind: KindMachine},
	{Prefix: "flowsLeavingByPlane", Kind: KindSize},
	{Prefix: "rendersBIRDOwns_", Kind: KindSize},
	{Prefix: "rendersFromSwitchOn_", Kind: KindSize},
	{Prefix: "warningsBIRDOwns_", Kind: KindSize}, // one per render, by design
	{Prefix: "warningsFromSwitchOn_", Kind: KindCount},
	{Prefix: "change", Suffix: "Switches", Kind: KindCount}, // change<i> of the flaps spec
	{Prefix: "change", Suffix: "RouteEvents", Kind: KindCount},
	{Prefix: "change", Suffix: "NoRouteWindows", Kind: KindCount},
	{Prefix: "change", Suffix: "LongestNoRouteMs", Kind: KindGap},
}

// KindOfFigure is a figure name's declared kind: the name itself in
// figureKinds, else the first matching figureKindRules entry, else — for
// a qualified name "Q.F" or "Q F" (a node, step, or signal before the
// figure, the qualifier ending at the last '.' or ' ') — F's declared
// kind. ok is false for an undeclared name.
func KindOfFigure(name string) (kind FigureKind, ok bool) {
	if k, ok := figureKinds[name]; ok {
		return k, true
	}
	for _, r := range figureKindRules {
		if len(name) > len(r.Prefix)+len(r.Suffix) && strings.HasPrefix(name, r.Prefix) && strings.HasSuffix(name, r.Suffix) {
			return r.Kind, true
		}
	}
	if i := strings.LastIndexAny(name, ". "); i >= 0 && i+1 < len(name) {
		if k, ok := figureKinds[name[i+1:]]; ok {
			return k, true
		}
	}
	return "", false
}

// RecordFigureKinds sets FigureKinds for every figure the row has: its
// declared kind, or "" with a note that compare does not judge it. The
// suite's row writer calls it on every row; harness's figure helpers call
// it for the figures they add. Calling it again is harmless.
func (s *ScenarioResult) RecordFigureKinds() {
	if len(s.Figures) == 0 {
		return
	}
	if s.FigureKinds == nil {
		s.FigureKinds = map[string]FigureKind{}
	}
	names := make([]string, 0, len(s.Figures))
	for name := range s.Figures {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		k, ok := KindOfFigure(name)
		s.FigureKinds[name] = k
		if ok {
			continue
		}
		note := fmt.Sprintf("figure %s has no declared kind: compare does not judge it", name)
		if !hasNote(s.Notes, note) {
			s.Notes = append(s.Notes, note)
		}
	}
}

func hasNote(notes []string, n string) bool {
	for _, x := range notes {
		if x == n {
			return true
		}
	}
	return false
}
