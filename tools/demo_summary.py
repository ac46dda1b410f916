#!/usr/bin/env python3
"""The demo's closing lines: what its first run found, in five lines, then where to go next.

Usage: tools/demo_summary.py RUN_DIR [--kept ADMIN_URL]   (RUN_DIR: the demo's first run, its summary.json)
       tools/demo_summary.py --rtt MS RUN_DIR...   (tools/demo.sh --vm --rtt MS: per client and transport,
       k, fixed and the new-request time at MS ms, as a Markdown table, from the runs' NAME / NAME-far paths)
"""
import json
import sys


def delta(paths: dict, name: str) -> float | None:
    p = paths.get(name, {}).get("new", {})
    v = p.get("paired_delta_median_ms")
    return v if isinstance(v, (int, float)) else None


def stall(paths: dict, name: str) -> str:
    s = paths.get(name, {}).get("stall", {})
    verdict = s.get("verdict", "no-data")
    if verdict in ("stall", "intermittent"):
        return f"{verdict.upper()} ({s.get('stalled', 0)}/{s.get('with_timing', 0)} new connections waited " \
               f">= {s.get('threshold_ms', 30):g} ms for the VLESS header)"
    return f"no stall ({s.get('stalled', 0)}/{s.get('with_timing', 0)})" if verdict == "none" else verdict


def conclusion(summary: dict) -> list[str]:
    paths = summary["paths"]
    nk, nq = delta(paths, "nagle-kernel"), delta(paths, "nagle-quickack")
    fast = [d for d in (delta(paths, "vless-kernel"), delta(paths, "vless-quickack")) if d is not None]
    lines = [f"What the demo found (run {summary['run']['id']}, new connections, median over direct):"]
    if nk is not None:
        lines.append(f"  Nagle-prone client, kernel's delayed ACK:  {nk:+.2f} ms  {stall(paths, 'nagle-kernel')}")
    if nq is not None:
        lines.append(f"  Nagle-prone client, QUICKACK listener:     {nq:+.2f} ms  {stall(paths, 'nagle-quickack')}")
    if fast:
        lines.append(f"  TCP_NODELAY client, either listener:       {min(fast):+.2f} .. {max(fast):+.2f} ms")
    if nk is not None and nq is not None:
        gone = paths.get("nagle-kernel", {}).get("stall", {}).get("verdict") in ("stall", "intermittent") and \
            paths.get("nagle-quickack", {}).get("stall", {}).get("verdict") == "none"
        lines.append(f"  => QUICKACK on the server removes {nk - nq:.1f} ms" if gone else
                     "  => no stall reproduced here (a loaded or unusual kernel?): see docs/methodology.md")
    return lines[:5]


def far_pairs(summary: dict):
    """(near name, near path, far path) for every path NAME-far beside its NAME."""
    paths = summary.get("paths", {})
    for name, far in paths.items():
        near_name = name.replace("-far", "", 1)
        if near_name != name and near_name in paths:
            yield near_name, paths[near_name], far


def rtt_row(label: str, near: dict, far: dict, rtt_ms: float, builtin_rtts: tuple | None) -> str | None:
    """One row: the runner's fit where it has one (paths with their own RTT), else k from the two
    medians over the RTT difference (a core's entry is not the path: the built-in client's RTTs to the
    same listeners, else the emulated delay)."""
    n0, n1 = near.get("new", {}).get("median_ms"), far.get("new", {}).get("median_ms")
    if not isinstance(n0, (int, float)) or not isinstance(n1, (int, float)):
        return None
    fit = far.get("round_trips") or {}
    if "k" in fit:
        k, (klo, khi) = fit["k"], fit["k_ci"]
        fixed, (flo, fhi) = fit["fixed_ms"], fit["fixed_ci_ms"]
        return f"| {label} | {k:.2f} [{klo:.2f}, {khi:.2f}] | {fixed:.1f} [{flo:.1f}, {fhi:.1f}] | {n1:.1f} | fit, " \
               f"{fit['n']} samples |"
    r0, r1 = near.get("rtt_ms"), far.get("rtt_ms")
    how = "medians over the path RTTs"
    if not isinstance(r0, (int, float)) or not isinstance(r1, (int, float)):
        r0, r1 = builtin_rtts or (0.0, float(rtt_ms))
        how = "medians over the built-in client's RTTs" if builtin_rtts else f"medians over {rtt_ms} ms"
    if r1 - r0 < 1:
        return None
    k = (n1 - n0) / (r1 - r0)
    return f"| {label} | {k:.2f} | {n0 - k * r0:.1f} | {n1:.1f} | {how} |"


def rtt_table(rtt_ms: float, runs: list[str]) -> list[str]:
    lines = [f"| client / transport (path) | k (round trips) | fixed (ms) | new request at {rtt_ms:g} ms (median ms) | from |",
             "|---|---|---|---|---|"]
    for run in runs:
        try:
            with open(f"{run}/summary.json") as f:
                summary = json.load(f)
        except (OSError, ValueError) as e:
            lines.append(f"| ({run}: {e}) | | | | |")
            continue
        pairs = list(far_pairs(summary))
        builtin = {n: (p.get("rtt_ms"), f.get("rtt_ms")) for n, p, f in pairs if n.startswith("builtin")}
        for name, near, far in pairs:
            node = next((name[len(c) + 1:] for c in ("builtin", "sing-box", "mihomo", "xray", "v2ray")
                         if name.startswith(c + "-")), "")
            rtts = builtin.get(f"builtin-{node}")
            rtts = rtts if rtts and all(isinstance(x, (int, float)) for x in rtts) else None
            row = rtt_row(name, near, far, rtt_ms, rtts)
            if row:
                lines.append(row)
    return lines


def main() -> int:
    if len(sys.argv) > 3 and sys.argv[1] == "--rtt":
        print("\n".join(rtt_table(float(sys.argv[2]), sys.argv[3:])))
        return 0
    run = sys.argv[1]
    kept = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--kept" else ""
    try:
        with open(f"{run}/summary.json") as f:
            lines = conclusion(json.load(f))
    except (OSError, ValueError, KeyError) as e:
        lines = [f"(no conclusion: {run}/summary.json: {e})"]
    print("\n".join(lines))
    print(f"  the picture: {run}/report.svg (open it in a browser)")
    print("next:")
    if kept:
        print(f"  the dashboard of the daemon that stays up: {kept}/ (docs/dashboard.md)")
    else:
        print("  keep a daemon up to open its dashboard (http://127.0.0.1:9090/): tools/demo.sh --keep")
    print("  measure your own client: docs/clients.md; with the cores you have: vlessbench clients (docs/runner.md)")
    print("  the seed's host -> VM layout: tools/demo.sh --vm, or the Debian package in your VM: docs/deploy.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
