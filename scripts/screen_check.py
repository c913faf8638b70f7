"""Does the pool score rank (model, chunking) pairs as their full score does? Spearman over the pairs.

For each pair: dense retrieval alone (no fusion, reranker or query rewriting), scored on the sweep's
tuning questions twice, over the whole corpus and over the BM25 candidate pool that screening
encodes (``search.screen.pool``, several sizes compared). The pool shares the corpus's vector cache, so it costs nothing here.

    .venv/bin/python scripts/screen_check.py configs/hybrid.yaml          # the default space's pairs
    .venv/bin/python scripts/screen_check.py configs/scifact-sweep.yaml \\
        --models minilm-l6:openvino:bfloat16 minilm-l3:openvino:bfloat16 minilm-l6-static \\
        --chunkings strategy=document strategy=fixed,unit=tokens,tokenizer=word,size=100,overlap=20

Pairs default to the product of the space's ``retrieval.dense.model`` and ``chunking.*`` choices.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import time

from scipy.stats import spearmanr

from sweep.config.load import parse_value
from sweep.pipeline.runner import Pipeline
from sweep.pipeline.screen import pool_score
from sweep.tuning.sweep_config import load_sweep_config


def model_params(spec: str) -> dict:
    """``name[:backend[:precision]]`` as dense settings."""
    name, *rest = spec.split(":")
    keys = ("retrieval.dense.model", "retrieval.dense.backend", "retrieval.dense.precision")
    return dict(zip(keys, [name, *rest]))


def chunking_params(spec: str) -> dict:
    """``strategy=fixed,size=100`` as chunking settings."""
    return {f"chunking.{k}": parse_value(v) for k, v in (item.split("=", 1) for item in spec.split(","))}


def pairs_of(sweep, models: list[str] | None, chunkings: list[str] | None) -> list[dict]:
    space = sweep.search.space
    if models is None:
        models = [str(m) for m in space["retrieval.dense.model"].categorical]
    if chunkings is None:
        keys = [k for k in space if k.startswith("chunking.") and space[k].categorical]
        choices = itertools.product(*(space[k].categorical for k in keys))
        chunkings = [",".join(f"{k.split('.', 1)[1]}={v}" for k, v in zip(keys, c)) for c in choices]
    return [model_params(m) | chunking_params(c) for m, c in itertools.product(models, chunkings)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("config")
    parser.add_argument(
        "--pools", type=int, nargs="+", help="BM25 candidates per question (default: 20 50 200)"
    )
    parser.add_argument("--models", nargs="+", help="name[:backend[:precision]] each")
    parser.add_argument("--chunkings", nargs="+", help="key=value,key=value each")
    parser.add_argument("--json", help="write the table and Spearman's rho per pool here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sweep = load_sweep_config(args.config)
    pools = args.pools or [20, 50, 200]
    objective = sweep.search.objective
    pipeline = Pipeline(sweep.base.cache_dir)
    rows = []
    for params in pairs_of(sweep, args.models, args.chunkings):
        config = sweep.for_trial(params | {"retrieval.mode": "dense", "retrieval.rerank.enabled": False})
        t = time.perf_counter()
        full = float(pipeline.run(config, [objective]).scores.mean()[objective])
        row = {"pair": " ".join(f"{k.rsplit('.', 1)[1]}={v}" for k, v in params.items()), "full": full}
        row["full_seconds"] = round(time.perf_counter() - t, 1)
        for pool in pools:
            found = pool_score(pipeline, config, objective, pool)
            row[f"pool{pool}"], row[f"pool{pool}_chunks"], row["chunks"] = (
                found.value,
                found.pool,
                found.chunks,
            )
        rows.append(row)
        print(json.dumps(row))
    summary = {"config": args.config, "objective": objective, "pairs": rows, "pools": {}}
    best = max(rows, key=lambda r: r["full"])["pair"]
    print(f"\n{args.config}: {len(rows)} pairs, {objective} of dense retrieval alone on the tuning questions")
    print(f"{'pair':<64} {'full':>7}" + "".join(f" {'pool ' + str(n):>16}" for n in pools))
    for r in sorted(rows, key=lambda r: -r["full"]):
        cells = "".join(f" {r[f'pool{n}']:.4f} {r[f'pool{n}_chunks']:>5}/{r['chunks']:<4}" for n in pools)
        print(f"{r['pair']:<64} {r['full']:7.4f}{cells}")
    for n in pools:
        rho = float(spearmanr([r["full"] for r in rows], [r[f"pool{n}"] for r in rows]).statistic)
        agrees = max(rows, key=lambda r: r[f"pool{n}"])["pair"] == best
        encoded = sum(r[f"pool{n}_chunks"] for r in rows) / sum(r["chunks"] for r in rows)
        summary["pools"][n] = {"spearman": rho, "best_agrees": agrees, "share_encoded": encoded}
        print(
            f"pool {n}: spearman {rho:.3f}, the best pair by pool score {'is' if agrees else 'is NOT'} "
            f"the best by full score, the pools hold {encoded:.0%} of the chunks"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summary, fh, indent=2)


if __name__ == "__main__":
    main()
