"""Benchmark: how long the first commands take when the network is gone (issue 39's bounds).

``python tests/perf/bench_offline.py [--root DIR] [--json OUT]``

Each command runs at its default settings in a child process, in two ways the network can be
gone: ``refused`` (the client pointed at a closed 127.0.0.1 port: ``XCM_DDG_BASE_URL``,
``XCM_GEMINI_BASE_URL``, ``HF_ENDPOINT``) and ``no network`` (inside ``unshare -rn``, a network
namespace without interfaces: no DNS, no route; skipped where user namespaces are off). The
bounds: ``python -m builder.crawl --countries all`` and ``python -m builder.concepts`` end
within 120 s with exit 2 and their run recorded ``failed``; ``python -m benchmark run --model
clip-l14`` (weights not in the cache) within 20 s, exit 2, one line with the ``Fix:``.
Prints wall seconds per command and way; exits 1 when a bound is broken. Not collected by
pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unshare_works() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-rn", "true"], capture_output=True).returncode == 0


def run(cmd: list[str], env: dict[str, str], cwd: Path, isolated: bool) -> tuple[float, int, str]:
    full = (["unshare", "-rn"] if isolated else []) + [sys.executable, "-m", *cmd]
    t0 = time.perf_counter()
    p = subprocess.run(full, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    return time.perf_counter() - t0, p.returncode, (p.stderr.strip().splitlines() or [""])[-1]


def last_status(workdir: Path, stage: str) -> str | None:
    con = sqlite3.connect(workdir / "catalog.sqlite")
    try:
        row = con.execute("SELECT status FROM stage_runs WHERE stage=? ORDER BY run_id DESC "
                          "LIMIT 1", (stage,)).fetchone()
    finally:
        con.close()
    return row[0] if row else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="xcm-offline-"))
    port = closed_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XCM_", "GEMINI"))}
    base.update(PYTHONPATH=str(REPO), TQDM_DISABLE="1", HF_HOME=str(root / "hf"),
                GEMINI_API_KEY="AIza-offline-bench")
    ways = {"refused": dict(XCM_DDG_BASE_URL=f"http://127.0.0.1:{port}",
                            XCM_GEMINI_BASE_URL=f"http://127.0.0.1:{port}",
                            HF_ENDPOINT=f"http://127.0.0.1:{port}")}
    if unshare_works():
        ways["no network"] = {}
    else:
        print("unshare -rn unavailable: the 'no network' runs are skipped")
    dataset = str(REPO / "data" / "synthetic-3xcm")
    out, broken = {}, []
    for way, extra in ways.items():
        env = {**base, **extra}
        wd = root / way.replace(" ", "-")
        wd.mkdir(parents=True, exist_ok=True)
        # the crawl's queries come from the bundled table: no network, no key
        subprocess.run([sys.executable, "-m", "builder.queries", "--workdir", "w"], env=base,
                       cwd=wd, capture_output=True, check=True)
        checks = [("crawl", ["builder.crawl.stage", "--countries", "all", "--workdir", "w"], 120, "crawl"),
                  ("concepts", ["builder.concepts", "--workdir", "w"], 120, "concepts"),
                  ("benchmark run", ["benchmark", "run", "--model", "clip-l14", "--task",
                                     "3xcm", "--dataset", dataset, "--output-dir", "r"], 20,
                   None)]
        for name, cmd, bound, stage in checks:
            wall, rc, line = run(cmd, env, wd, isolated=(way == "no network"))
            status = last_status(wd / "w", stage) if stage else None
            ok = rc == 2 and wall <= bound and (stage is None or status == "failed") and (
                stage is not None or "Fix:" in line)
            out[f"{name} ({way})"] = {"seconds": round(wall, 1), "exit": rc, "status": status,
                                      "bound_s": bound, "ok": ok, "line": line[:300]}
            print(f"{name:<14} {way:<11} {wall:6.1f} s  exit {rc}  {status or '':<7} "
                  f"{'ok' if ok else 'BROKEN'}  {line[:160]}")
            broken += [] if ok else [f"{name} ({way})"]
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    if broken:
        print(f"bounds broken: {', '.join(broken)}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
