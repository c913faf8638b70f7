"""Malformed inputs through the command line: exit 2, one line naming the file and the key, no traceback.

(The loaders' own malformed-file cases are in test_loaders.py; these are the
configuration and search-space cases, checked end to end.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.cli import main

DOCS = [{"id": "d1", "text": "Lists are mutable sequences."}, {"id": "d2", "text": "Tuples are immutable."}]
QUESTIONS = [
    {"id": "q1", "text": "mutable sequence", "evidence": [{"doc_id": "d1", "grade": 1}]},
    {"id": "q2", "text": "immutable", "evidence": [{"doc_id": "d2", "grade": 1}]},
]


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.jsonl").write_text("\n".join(map(json.dumps, DOCS)))
    (data / "questions.jsonl").write_text("\n".join(map(json.dumps, QUESTIONS)))
    return tmp_path


def base(tmp_path: Path) -> dict:
    return {
        "dataset": {"loader": "native", "path": "data"},
        "retrieval": {"mode": "bm25", "candidates": 2, "top_k": 2},
        "evaluation": {"ks": [1, 2]},
        "cache_dir": str(tmp_path / "cache"),
        "search": {"trials": 2, "objective": "ndcg@2", "space": {"retrieval.bm25.k1": {"float": [0.5, 1.5]}}},
    }


def edit(data: dict, key: str, value) -> dict:
    node = data
    *parents, last = key.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    if value is DELETE:
        node.pop(last, None)
    else:
        node[last] = value
    return data


DELETE = object()

CONFIG_CASES = [
    # (key to change, new value, command, expected message part)
    ("retrievl", {"mode": "bm25"}, "eval", "retrievl: unknown key"),
    ("retrieval.top_k", "ten", "eval", "retrieval.top_k: Input should be a valid integer"),
    ("retrieval.mode", "sparse", "eval", "retrieval.mode: Input should be 'bm25', 'dense' or 'hybrid'"),
    ("dataset.path", DELETE, "eval", "dataset.path: missing required key"),
    ("dataset.path", "nowhere", "eval", "dataset.path:"),
    ("dataset.loader", "csv", "eval", "dataset.loader: Input should be"),
    (
        "dataset.relevance_threshold",
        -1,
        "eval",
        "dataset.relevance_threshold: Input should be greater than or equal to 0",
    ),
    (
        "chunking",
        {"strategy": "fixed", "size": 100, "overlap": 200},
        "eval",
        "overlap (200) must be smaller than size (100)",
    ),
    (
        "retrieval.fusion.alpha",
        1.5,
        "eval",
        "retrieval.fusion.alpha: Input should be less than or equal to 1",
    ),
    ("retrieval.bm25.stemming", "snowball", "eval", "retrieval.bm25.stemming: Input should be"),
    ("evaluation.hit_min_overlap", 0, "eval", "evaluation.hit_min_overlap: Input should be greater than 0"),
    ("retrieval.dense", {"modle": "x"}, "eval", "retrieval.dense.modle: unknown key"),
    ("search.objective", "ndgc@10", "sweep", "search.objective: unknown metric 'ndgc@10'"),
    ("search.objective", "recall", "sweep", "metric 'recall' needs a cutoff"),
    ("search.objective", "r_precision@5", "sweep", "metric 'r_precision' takes no cutoff"),
    (
        "search.objective",
        "NDCG@2",
        "sweep",
        "search.objective: 'NDCG@2' is not how results name it: write 'ndcg@2' (valid here: recall@1,",
    ),
    (
        "search.objective",
        "recall@2 ",
        "sweep",
        "search.objective: 'recall@2 ' is not how results name it: write 'recall@2'",
    ),
    (
        "search.objective",
        "ndcg@50",
        "sweep",
        "search.objective: 'ndcg@50' cuts at 50, but a trial ranks at most 2 results (retrieval.top_k) (raise retrieval.top_k to 50, or pick one of: recall@1, precision@1",
    ),
    (
        "search.extra_objectives",
        ["MRR"],
        "sweep",
        "search.extra_objectives: 'MRR' is not how results name it: write 'mrr'",
    ),
    ("search.trails", 5, "sweep", "search.trails: unknown key"),
    ("search.sampler", "bayes", "sweep", "search.sampler: Input should be 'tpe', 'random' or 'grid'"),
    ("search.holdout", {"fraction": 1.5}, "sweep", "search.holdout.fraction: Input should be less than 1"),
    ("search.pruner", "hyperband", "sweep", "search.pruner: Input should be"),
    ("search.extra_objectives", ["latency_ms"], "sweep-pruned", "pruning needs a single objective"),
    ("search.grace_period", 5, "sweep", "grace_period must be longer than heartbeat_interval"),
    (
        "search.space",
        {"retrieval.bm25.k1": {"float": [0.5, 1.5], "categorical": [1]}},
        "sweep",
        "give exactly one of",
    ),
    (
        "search.space",
        {"retrieval.bm25.k9": {"float": [0.5, 1.5]}},
        "sweep",
        "'retrieval.bm25.k9' is not a configuration key",
    ),
    (
        "search.space",
        {"retrieval.fusion.alpha": {"float": [0, 3]}},
        "sweep",
        "search.space.retrieval.fusion.alpha: value 3.0 can never make a valid configuration",
    ),
    (
        "search.space",
        {"chunking.size": {"categorical": [200, 50]}, "chunking.overlap": {"int": [0, 300], "step": 50}},
        "sweep-fixed",
        "search.space.chunking.overlap: value 300 can never make a valid configuration: overlap (300) must",
    ),
    (
        "search.space",
        {"chunking.strategy": {"categorical": ["fixed", "recursive"]}},
        "sweep",
        "search.space.chunking.strategy: the configuration's own value 'document' (the baseline, trial 0) is not among",
    ),
    ("search.space", {"retrieval.top_k": {"int": [9, 3]}}, "sweep", "low 9 is above high 3"),
    (
        "search.space",
        {
            "retrieval.top_k": {"int": [1, 3], "when": {"retrieval.candidates": 3}},
            "retrieval.candidates": {"int": [1, 9]},
        },
        "sweep",
        "not an earlier parameter",
    ),
    ("search.holdout", {"tune_split": "a"}, "sweep", "give both tune_split and heldout_split"),
    (
        "search.space",
        {"retrieval.bm25.k1": {"float": [0.5, 1.5], "step": 0}},
        "sweep",
        "step must be > 0, got 0",
    ),
    (
        "search.space",
        {"retrieval.bm25.k1": {"float": [0.5, 1.5], "step": -0.1}},
        "sweep",
        "step must be > 0, got -0.1",
    ),
    (
        "search.space",
        {"retrieval.bm25.k1": {"float": [0, 1.5], "log": True}},
        "sweep",
        "a log scale needs low > 0, got 0",
    ),
    (
        "search.space",
        {"retrieval.top_k": {"int": [1, 5], "step": 0.5}},
        "sweep",
        "an int range needs a whole step",
    ),
    ("search.space", {"retrieval.bm25.k1": {"float": [0.5, float("inf")]}}, "sweep", "finite number"),
    ("search.trials", 10**12, "sweep", "search.trials: Input should be less than or equal to 1000000"),
    ("search.study", "it's", "sweep", 'search.study: study name "it\'s" is not allowed'),
    ("search.study", "../../etc", "sweep", "is not allowed"),
    ("search.study", "a/b", "sweep", "is not allowed"),
    ("cache_dir", "/proc/version/cache", "eval", "cache_dir: /proc/version/cache is not a writable folder"),
    ("cache_dir", "/proc/version/cache", "sweep", "cache_dir: /proc/version/cache is not a writable folder"),
]


@pytest.mark.parametrize(
    "key,value,command,expected", CONFIG_CASES, ids=[c[0] + ":" + c[3][:30] for c in CONFIG_CASES]
)
def test_malformed_config(folder, capsys, key, value, command, expected):
    data = edit(base(folder), key, value)
    if command == "sweep-pruned":
        data["search"]["pruner"] = "median"
    if command == "sweep-fixed":
        data["chunking"] = {"strategy": "fixed", "size": 200, "overlap": 0}
    command = command.split("-")[0]
    (folder / "c.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    code = main(
        [command, str(folder / "c.yaml"), "--runs-dir", str(folder / "runs")]
        if command == "sweep"
        else [command, str(folder / "c.yaml")]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert str(folder / "c.yaml") in err and expected in err and "Traceback" not in err


@pytest.mark.parametrize(
    "text,expected",
    [
        ("dataset: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping of sections, got list"),
        ("", "dataset: missing required key"),
        (b"dataset: {path: caf\xe9}\n", "line 1: not UTF-8 text (byte 0xe9)"),
        (
            "dataset: {path: data}\nretrieval: {mode: bm25}\nretrieval: {mode: dense}\n",
            "line 3: key 'retrieval' appears twice in one section (first at line 2)",
        ),
        ("dataset: {path: data, path: other}\n", "key 'path' appears twice"),
        (
            "dataset: {path: data}\nstudy: mine\n",
            "study: unknown key; it belongs under search: (search.study)",
        ),
        (
            "dataset: {path: data}\nretrieval: {fusion: {alpha: .nan}}\n",
            "retrieval.fusion.alpha: must be a finite number",
        ),
        (
            "dataset: {path: data}\nretrieval: {top_k: 1000000000000}\n",
            "retrieval.top_k: Input should be less than or equal to 100000",
        ),
        (
            "dataset: {path: data}\nevaluation: {ks: [5, 0]}\n",
            "evaluation.ks.1: Input should be greater than or equal to 1",
        ),
    ],
)
def test_unreadable_config_files(folder, capsys, text, expected):
    path = folder / "c.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert main(["eval", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and str(path) in err


def test_missing_config_file_and_bad_override(folder, capsys):
    assert main(["eval", str(folder / "none.yaml")]) == 2
    assert "config file not found" in capsys.readouterr().err
    (folder / "c.yaml").write_text(yaml.safe_dump(base(folder)))
    assert main(["eval", str(folder / "c.yaml"), "retrieval"]) == 2
    assert "an override must look like key.path=value" in capsys.readouterr().err


def test_a_model_that_does_not_exist_names_the_key(folder, capsys):
    (folder / "c.yaml").write_text(yaml.safe_dump(base(folder)))
    assert (
        main(
            [
                "eval",
                str(folder / "c.yaml"),
                "retrieval.mode=dense",
                "retrieval.dense.model=no-such-org/no-such-model",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert (
        "retrieval.dense.model: cannot load model 'no-such-org/no-such-model'" in err
        and str(folder / "c.yaml") in err
    )
    assert "give a local folder, one of the aliases" in err


def test_eval_set_errors_are_counted_and_lenient_reports_drops(folder, capsys):
    bad = QUESTIONS + [
        {"id": "q3", "text": "x", "evidence": [{"doc_id": "d9", "grade": 1}]},
        {"id": "q4", "text": "y", "evidence": [{"doc_id": "d1", "grade": 1, "start": 5, "end": 900}]},
    ]
    (folder / "data" / "questions.jsonl").write_text("\n".join(map(json.dumps, bad)))
    (folder / "c.yaml").write_text(yaml.safe_dump(base(folder)))
    assert main(["eval", str(folder / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert "2 problem(s) in the eval set (2 in" in err
    assert "questions.jsonl:3" in err and "unknown document 'd9'" in err and "outside document 'd1'" in err
    assert main(["eval", str(folder / "c.yaml"), "--lenient"]) == 0


def test_debug_shows_the_traceback(folder):
    (folder / "c.yaml").write_text("retrievl: {}\ndataset: {path: data}\n")
    quiet = subprocess.run(
        [sys.executable, "-m", "sweep", "eval", str(folder / "c.yaml")], capture_output=True, text=True
    )
    loud = subprocess.run(
        [sys.executable, "-m", "sweep", "--debug", "eval", str(folder / "c.yaml")],
        capture_output=True,
        text=True,
    )
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr and quiet.stderr.count("\n") == 1
    assert loud.returncode != 0 and "Traceback" in loud.stderr and "ConfigError" in loud.stderr


@pytest.mark.parametrize("name", ["../escape", "a/b", "it's", "x" * 101, ""])
def test_study_names_that_could_leave_the_runs_folder(folder, capsys, name):
    (folder / "c.yaml").write_text(yaml.safe_dump(base(folder)))
    assert main(["sweep", str(folder / "c.yaml"), "--study", name, "--runs-dir", str(folder / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --study: study name {name!r} is not allowed") and err.count("\n") == 1
    assert not (folder / "runs").exists() or not any((folder / "runs").iterdir())


def test_non_utf8_beir_qrels_name_the_line(tmp_path):
    from sweep.data import load_beir
    from sweep.errors import DataError

    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "alpha"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "alpha?"}\n')
    (tmp_path / "qrels" / "test.tsv").write_bytes(b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td\xe92\t1\n")
    with pytest.raises(DataError, match=r"test.tsv:3: not UTF-8 text \(byte 0xe9\)"):
        load_beir(tmp_path)


def test_a_bad_override_is_blamed_on_the_override_not_the_file(folder, capsys):
    (folder / "c.yaml").write_text(yaml.safe_dump(base(folder)))
    assert main(["eval", str(folder / "c.yaml"), "retrieval.top_k=ten"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: command-line override 'retrieval.top_k=ten' (on {folder / 'c.yaml'}): retrieval.top_k: "
        "Input should be a valid integer"
    )
    assert (
        main(
            ["sweep", str(folder / "c.yaml"), "retrieval.fusion.alpha=3", "--runs-dir", str(folder / "runs")]
        )
        == 2
    )
    assert "command-line override 'retrieval.fusion.alpha=3' (on " in capsys.readouterr().err


def test_no_arguments_prints_the_sweep_usage(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m sweep [-h]") and "config [overrides ...]" in err
    assert "e.g. python -m sweep configs/hybrid.yaml" in err


def test_a_hub_model_that_cannot_load_fails_in_seconds(folder, monkeypatch):
    """Without the check, a missing model costs ~90 s of download retries and a bare connection error."""
    import time

    (folder / "c.yaml").write_text(yaml.safe_dump(base(folder)))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: like a machine offline
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweep",
            "eval",
            str(folder / "c.yaml"),
            "retrieval.mode=dense",
            "retrieval.dense.model=no-such-org/no-such-model",
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in __import__("os").environ.items() if k != "TRANSFORMERS_OFFLINE"},
    )
    assert proc.returncode == 2 and time.monotonic() - started < 45, proc.stderr
    assert (
        "retrieval.dense.model: cannot load model 'no-such-org/no-such-model': it is not in the local Hugging "
        "Face cache and the hub cannot be reached"
        in proc.stderr
        and proc.stderr.count("\n") == 1
    )


def test_an_objective_typo_leaves_the_study_untouched_and_the_corrected_command_runs_it(folder, capsys):
    (folder / "c.yaml").write_text(yaml.safe_dump(base(folder)))
    runs = folder / "runs"
    assert main(["sweep", str(folder / "c.yaml"), "search.objective=NDCG@2", "--runs-dir", str(runs)]) == 2
    assert "search.objective: 'NDCG@2' is not how results name it: write 'ndcg@2'" in capsys.readouterr().err
    assert not (runs / "c" / "optuna.db").exists()  # refused at start: no trial ran, none failed
    assert main(["sweep", str(folder / "c.yaml"), "search.objective=ndcg@2", "--runs-dir", str(runs)]) == 0
    assert "2 complete trials in study 'c'" in capsys.readouterr().out
