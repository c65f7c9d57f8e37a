package env

// The variables' names. Each is one entry of Knobs; a process that hands a
// setting to a child writes it with Set(name, value).
const (
	// Machine.
	TimeoutScale = "BIRDCAGE_TIMEOUT_SCALE"
	ProbeRate    = "BIRDCAGE_PROBE_RATE"
	VMAccelUsed  = "BIRDCAGE_VM_ACCEL_USED"

	// Cluster.
	Programmer        = "BIRDCAGE_PROGRAMMER"
	UpgradeProgrammer = "BIRDCAGE_UPGRADE_PROGRAMMER"
	Tunnel            = "BIRDCAGE_TUNNEL"
	RenderKnobs       = "BIRDCAGE_RENDER_KNOBS"
	RaiseNeighLimits  = "BIRDCAGE_RAISE_NEIGH_LIMITS"
	BIRDCache         = "BIRDCAGE_BIRD_CACHE"
	Calico            = "BIRDCAGE_CALICO"
	CalicoFrom        = "BIRDCAGE_CALICO_FROM"

	// Timing model.
	Timing               = "BIRDCAGE_TIMING"
	RestartDelay         = "BIRDCAGE_RESTART_DELAY"
	RestartDelayPerRoute = "BIRDCAGE_RESTART_DELAY_PER_ROUTE"
	ConfdLatency         = "BIRDCAGE_CONFD_LATENCY"
	ConfdSerial          = "BIRDCAGE_CONFD_SERIAL"
	BIRDScanTime         = "BIRDCAGE_BIRD_SCAN_TIME"

	// The programmer process (set by the supervisor, read by
	// cmd/birdcage-programmer as its flags' defaults).
	ProgrammerStartupDelay        = "BIRDCAGE_PROGRAMMER_STARTUP_DELAY"
	ProgrammerResyncDelayPerRoute = "BIRDCAGE_PROGRAMMER_RESYNC_DELAY_PER_ROUTE"
	ProgrammerWriteOrder          = "BIRDCAGE_PROGRAMMER_WRITE_ORDER"
	ProgrammerDeleteNamesProtocol = "BIRDCAGE_PROGRAMMER_DELETE_NAMES_PROTOCOL"
	ProgrammerWriteWindow         = "BIRDCAGE_PROGRAMMER_WRITE_WINDOW"
	ProgrammerIPv4Metric          = "BIRDCAGE_PROGRAMMER_IPV4_METRIC"
	ProgrammerNoTunnelMTU         = "BIRDCAGE_PROGRAMMER_NO_TUNNEL_MTU"
	ProgrammerTakeoverGap         = "BIRDCAGE_PROGRAMMER_TAKEOVER_GAP"
	ProgrammerNoBIRDCleanup       = "BIRDCAGE_PROGRAMMER_NO_BIRD_CLEANUP"

	// Results and artifacts.
	Artifacts   = "BIRDCAGE_ARTIFACTS"
	ResultsJoin = "BIRDCAGE_RESULTS_JOIN"
	Lab         = "BIRDCAGE_LAB"
	Repeat      = "BIRDCAGE_REPEAT"
	Build       = "BIRDCAGE_BUILD"

	// Scenario runs.
	Depth          = "BIRDCAGE_DEPTH"
	SweepDelays    = "BIRDCAGE_SWEEP_DELAYS"
	ScaleNodes     = "BIRDCAGE_SCALE_NODES"
	Selftest       = "BIRDCAGE_SELFTEST"
	ShardDurations = "BIRDCAGE_SHARD_DURATIONS"
	Progress       = "BIRDCAGE_PROGRESS"
	KeepOnFail     = "BIRDCAGE_KEEP_ON_FAIL"
	Pcap           = "BIRDCAGE_PCAP"
	WhatIf         = "BIRDCAGE_WHATIF"
	Require        = "BIRDCAGE_REQUIRE"
	Perf           = "BIRDCAGE_PERF"
	CLI            = "BIRDCAGE_CLI"

	// The kernel VM runner (read by ci/vm/run and ci/vm's tests).
	VMTests            = "BIRDCAGE_VM_TESTS"
	KernelCache        = "BIRDCAGE_KERNEL_CACHE"
	VMTimeout          = "BIRDCAGE_VM_TIMEOUT"
	VMAccel            = "BIRDCAGE_VM_ACCEL"
	VMBootDeadline     = "BIRDCAGE_VM_BOOT_DEADLINE"
	VMKVMProbeDeadline = "BIRDCAGE_VM_KVM_PROBE_DEADLINE"
	VMAccelCache       = "BIRDCAGE_VM_ACCEL_CACHE"
	VMKVMDevice        = "BIRDCAGE_VM_KVM_DEVICE"
	VMMemory           = "BIRDCAGE_VM_MEMORY"
	VMCPUs             = "BIRDCAGE_VM_CPUS"
	VMModules          = "BIRDCAGE_VM_MODULES"
	VMWritable         = "BIRDCAGE_VM_WRITABLE"
	VMConsole          = "BIRDCAGE_VM_CONSOLE"
	VMAppend           = "BIRDCAGE_VM_APPEND"
	VMFastBoot         = "BIRDCAGE_VM_FAST_BOOT"
	DemoVM             = "BIRDCAGE_DEMO_VM"
	GoTimeout          = "BIRDCAGE_GO_TIMEOUT"

	// Internal: set by a birdcage process for a child it starts itself.
	SupervisorReadyFD = "BIRDCAGE_SUPERVISOR_READY_FD"
	SupervisorLog     = "BIRDCAGE_SUPERVISOR_LOG"
	TestHelper        = "BIRDCAGE_TEST_HELPER"
	ResultsJoinHelper = "BIRDCAGE_RESULTS_JOIN_HELPER"
	VMInside          = "BIRDCAGE_VM_INSIDE"
	VMProbe           = "BIRDCAGE_VM_PROBE"
)

// Retired names: setting one is an error that names its replacement.
var Retired = map[string]string{
	"BIRDCAGE_RELEASES_FULL":     Depth + "=full (or " + Depth + "=" + DepthReleases + ")",
	"BIRDCAGE_COLLISION_FULL":    Depth + "=full (or " + Depth + "=" + DepthCollision + ")",
	"BIRDCAGE_CLEANUP_LATE_FULL": Depth + "=full (or " + Depth + "=" + DepthCleanupLate + ")",
	"BIRDCAGE_SLOW_FULL":         Depth + "=full (or " + Depth + "=" + DepthHoldTimer + ")",
	"BIRDCAGE_SWEEP":             Depth + "=full (or " + Depth + "=" + DepthSweep + ")",
}

// Set is name=value, as a child process's environment entry.
func Set(name, value string) string { return name + "=" + value }
