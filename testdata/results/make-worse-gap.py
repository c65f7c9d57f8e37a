#!/usr/bin/env python3
"""Derive liveconfig-noencap-worse-gap.json from the recorded run: the first
scenario with probes gets 300 ms more on one flow's longest gap (and so on
its total and its longestProbeGapMs figure). Everything else is the
recorded run unchanged. Usage: make-worse-gap.py IN OUT FLOW"""
import json, sys

src, dst, flow = sys.argv[1], sys.argv[2], sys.argv[3]
doc = json.load(open(src))
for s in doc["scenarios"]:
    p = s.get("probes")
    if not p:
        continue
    for f in p["flows"]:
        if f["flow"] == flow:
            f["longestGapMs"] += 300
            f["gap"]["endNs"] += 300_000_000
            g = f["longestGapMs"]
            break
    else:
        sys.exit("no flow %s in %s" % (flow, s["name"]))
    if g > p["total"]["longestGapMs"]:
        p["total"]["longestGapMs"], p["total"]["longestGapFlow"] = g, flow
    figs = s.setdefault("figures", {})
    figs["longestProbeGapMs"] = max(figs.get("longestProbeGapMs", 0), g)
    print("worse gap: %s, flow %s: longest gap %.1f ms" % (s["name"], flow, g))
    break
json.dump(doc, open(dst, "w"), indent=2, ensure_ascii=False)
