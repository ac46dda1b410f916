#!/usr/bin/env python3
"""The demo's closing lines: what its first run found, in five lines, then where to go next.

Usage: tools/demo_summary.py RUN_DIR [--kept ADMIN_URL]   (RUN_DIR: the demo's first run, its summary.json)
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


def main() -> int:
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
