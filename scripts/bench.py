"""Benchmarks, printed as figures and ratios measured in one run.

    ./scripts/bench [--only bootstrap,trial,sweep_trial,scale,metrics,bm25,encode,eval,sweep,workers,inference,screen] [--questions 10000]

Ratios, not absolute times, are the targets: the machines are shared and
noisy. Each section is a module of ``scripts/benchmarks/``, its timing helpers in
``benchmarks/common.py``. The last line is one JSON object with every headline figure.
"""

from __future__ import annotations

import argparse
import json
import sys

from benchmarks import bm25, bootstrap, cold_warm, encode, inference, metrics, scale, screen, sweeps, trial
from benchmarks.common import ROOT

SECTIONS = {
    "bootstrap": lambda a: bootstrap.bench_bootstrap(),
    "trial": lambda a: trial.bench_warm_trial(),
    "sweep_trial": lambda a: trial.bench_sweep_trial(),
    "scale": lambda a: scale.bench_scale(),
    "metrics": lambda a: metrics.bench_metrics(a.questions),
    "bm25": lambda a: bm25.bench_bm25(),
    "encode": lambda a: encode.bench_encode(),
    "eval": lambda a: cold_warm.bench_eval_cold_warm(),
    "sweep": lambda a: sweeps.bench_sweep(),
    "workers": lambda a: sweeps.bench_workers(),
    "inference": lambda a: inference.bench_inference(),
    "screen": lambda a: screen.bench_screen(),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help="comma-separated sections: " + ", ".join(SECTIONS)
    )
    parser.add_argument("--questions", type=int, default=10_000)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    summary: dict = {}
    for name in args.only.split(","):
        summary[name] = SECTIONS[name](args)
    import resource

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak memory: this process {peak_mb:.0f} MB, largest child process {children_mb:.0f} MB")
    headline = {  # figures and ratios; plain durations (``..._s``) stay in the lines above
        k: v
        for section in summary.values()
        for k, v in section.items()
        if not k.endswith("_s") or k.endswith("_per_s")
    }
    headline["peak_rss_mb"] = peak_mb
    print(json.dumps(headline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
