"""Inputs that used to change a number without a word: each is now handled exactly or is a one-line error."""

from __future__ import annotations

import errno
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from sweep.cli import main
from sweep.config.load import load_config
from sweep.data import load_beir, load_native, load_span_csv
from sweep.errors import DataError
from sweep.metrics.runfiles import read_qrels, read_run
from sweep.metrics.trec import score
from sweep.pipeline.runner import Pipeline

BOM = b"\xef\xbb\xbf"


def write(path: Path, text: str, bom: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((BOM if bom else b"") + text.encode())
    return path


def native(tmp_path: Path, questions: list[dict], docs: list[dict] | None = None, bom: bool = False) -> Path:
    docs = docs or [
        {"id": "d1", "text": "Lists are mutable sequences. " * 4},
        {"id": "d2", "text": "Tuples are fixed."},
    ]
    write(tmp_path / "data" / "corpus.jsonl", "\n".join(map(json.dumps, docs)), bom)
    write(tmp_path / "data" / "questions.jsonl", "\n".join(map(json.dumps, questions)), bom)
    return tmp_path / "data"


Q1 = {"id": "q1", "text": "mutable", "evidence": [{"doc_id": "d1", "grade": 1}]}
Q2 = {"id": "q2", "text": "fixed", "evidence": [{"doc_id": "d2", "grade": 1}]}


# -- byte-order marks ---------------------------------------------------------------


def test_a_bom_never_sticks_to_the_first_id(tmp_path):
    write(tmp_path / "q.txt", "q1 0 d1 1\nq2 0 d2 1\n", bom=True)
    write(tmp_path / "r.txt", "q1 Q0 d1 1 2.0 t\nq2 Q0 d9 1 1.0 t\nq2 Q0 d2 2 0.5 t\n", bom=True)
    assert read_qrels(tmp_path / "q.txt").qid[0] == "q1" and read_run(tmp_path / "r.txt").qid[0] == "q1"
    scores = score(tmp_path / "q.txt", tmp_path / "r.txt", ["mrr"])
    assert scores.question_ids == ["q1", "q2"] and scores.values["mrr"].tolist() == [
        1.0,
        0.5,
    ]  # q1 not skipped

    eval_set = load_native(native(tmp_path / "n", [Q1, Q2], bom=True))
    assert [d.id for d in eval_set.documents] == ["d1", "d2"] and [q.id for q in eval_set.questions] == [
        "q1",
        "q2",
    ]

    beir = tmp_path / "beir"
    write(beir / "corpus.jsonl", json.dumps({"_id": "d1", "text": "alpha"}) + "\n", bom=True)
    write(beir / "queries.jsonl", json.dumps({"_id": "q1", "text": "alpha?"}) + "\n", bom=True)
    write(beir / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n", bom=True)
    assert [q.id for q in load_beir(beir).questions] == ["q1"]

    write(tmp_path / "csv" / "corpora" / "c1.md", "The answer is here.", bom=True)
    refs = json.dumps([{"content": "The answer", "start_index": 0, "end_index": 10}]).replace('"', '""')
    write(tmp_path / "csv" / "q.csv", f'question,references,corpus_id\nwhere?,"{refs}",c1\n', bom=True)
    spans = load_span_csv(tmp_path / "csv" / "q.csv")
    assert spans.documents[0].text == "The answer is here." and spans.questions[0].evidence[0].end == 10

    config = write(
        tmp_path / "c.yaml", "dataset: {path: n/data}\nretrieval: {mode: bm25, top_k: 2}\n", bom=True
    )
    assert load_config(config).retrieval.mode == "bm25"


# -- not UTF-8: file and line -------------------------------------------------------------


@pytest.mark.parametrize("which", ["corpus.jsonl", "questions.jsonl"])
def test_non_utf8_eval_set_files_name_file_and_line(tmp_path, which):
    folder = native(tmp_path, [Q1, Q2])
    path = folder / which
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"e", b"\xe9", 1)
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(DataError, match=rf"{which}:2: not UTF-8 text \(byte 0xe9\)"):
        load_native(folder)


def test_non_utf8_trec_and_csv_files(tmp_path):
    write(tmp_path / "q.txt", "q1 0 d1 1\n")
    (tmp_path / "r.txt").write_bytes(b"q1 Q0 d1 1 2.0 t\nq1 Q0 d\xff 2 1.0 t\n")
    with pytest.raises(DataError, match=r"r.txt:2: not UTF-8"):
        score(tmp_path / "q.txt", tmp_path / "r.txt", ["mrr"])
    (tmp_path / "c.csv").write_bytes(b"question,references,corpus_id\n\x93smart\x94,[],c1\n")
    with pytest.raises(DataError, match=r"c.csv:2: not UTF-8"):
        load_span_csv(tmp_path / "c.csv")


# -- errors at load time, naming file and line --------------------------------------------


def test_run_files_with_nan_or_infinite_scores(tmp_path):
    write(tmp_path / "q.txt", "q1 0 d1 1\n")
    for bad in ("nan", "inf", "-Infinity"):
        write(tmp_path / "r.txt", f"q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 {bad} t\n")
        with pytest.raises(DataError, match=rf"r.txt:2 \[score\]: score '{bad}' is not a finite number"):
            read_run(tmp_path / "r.txt")


def test_empty_qrels_are_an_error(tmp_path):
    write(tmp_path / "q.txt", "\n\n")
    with pytest.raises(DataError, match="q.txt: no judgments: the qrels file is empty"):
        read_qrels(tmp_path / "q.txt")
    beir = tmp_path / "beir"
    write(beir / "corpus.jsonl", json.dumps({"_id": "d1", "text": "alpha"}))
    write(beir / "queries.jsonl", json.dumps({"_id": "q1", "text": "alpha?"}))
    write(beir / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n")
    with pytest.raises(DataError, match="test.tsv: no judgments"):
        load_beir(beir)


def test_duplicate_evidence_items_are_an_error(tmp_path):
    twice = {
        "id": "q1",
        "text": "mutable",
        "evidence": [
            {"doc_id": "d1", "grade": 1, "start": 0, "end": 5},
            {"doc_id": "d1", "grade": 2, "start": 0, "end": 5},
        ],
    }
    with pytest.raises(
        DataError,
        match=r"questions.jsonl:2 \[evidence\[1\]\]: question 'q1': evidence\[1\] repeats "
        r"evidence\[0\]",
    ):
        load_native(native(tmp_path, [Q2, twice]))


def test_non_integer_span_offsets_are_an_error(tmp_path):
    q = {"id": "q1", "text": "mutable", "evidence": [{"doc_id": "d1", "grade": 1, "start": 0.5, "end": 5}]}
    with pytest.raises(
        DataError, match=r"questions.jsonl:1 \[evidence\[0\].start\]: expected int, got float 0.5"
    ):
        load_native(native(tmp_path / "a", [q]))
    write(tmp_path / "csv" / "corpora" / "c1.md", "The answer is here.")
    for start in ("0.5", '"0"'):
        refs = f'[{{""content"": ""The answer"", ""start_index"": {start.replace(chr(34), chr(34) * 2)}, ""end_index"": 10}}]'
        write(tmp_path / "csv" / "q.csv", f'question,references,corpus_id\nwhere?,"{refs}",c1\n')
        with pytest.raises(
            DataError, match=r"q.csv:2 \[references\]: references must be a list .* integer offsets"
        ):
            load_span_csv(tmp_path / "csv" / "q.csv")


def test_a_strict_error_points_at_the_qrels_line_and_says_what_to_do(tmp_path):
    beir = tmp_path / "beir"
    write(beir / "corpus.jsonl", json.dumps({"_id": "d1", "text": "alpha"}))
    write(beir / "queries.jsonl", "\n".join(json.dumps({"_id": f"q{i}", "text": "alpha?"}) for i in (1, 2)))
    write(beir / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t1\nq2\td7\t1\n")
    with pytest.raises(DataError) as e:
        load_beir(beir)
    assert str(e.value).startswith(
        f"{beir / 'qrels' / 'test.tsv'}:4: question 'q2' cites unknown document 'd7'"
    )
    assert "or pass --lenient" in str(e.value)


def test_no_answerable_question_is_an_error(tmp_path, capsys):
    data = native(
        tmp_path,
        [{"id": "q1", "text": "x", "evidence": [{"doc_id": "d1", "grade": 0}]}, {"id": "q2", "text": "y"}],
    )
    config = write(
        tmp_path / "c.yaml",
        yaml.safe_dump(
            {
                "dataset": {"path": str(data)},
                "retrieval": {"mode": "bm25"},
                "cache_dir": str(tmp_path / "cache"),
            }
        ),
    )
    assert main(["eval", str(config)]) == 2
    err = capsys.readouterr().err
    assert (
        "dataset: none of the 2 selected questions has evidence of grade >= 1" in err and err.count("\n") == 1
    )


def test_lenient_lists_every_dropped_item_and_counts_unjudged_questions(tmp_path, capsys):
    docs = [
        {"id": "d1", "text": "Lists are mutable sequences."},
        {"id": "d2", "text": "   "},
        {"id": "d3", "text": "Sets hold unique items."},
    ]
    questions = [
        Q1,
        {
            "id": "q2",
            "text": "fixed",
            "evidence": [{"doc_id": "d2", "grade": 1}, {"doc_id": "d3", "grade": 1}],
        },
        {"id": "q3", "text": "sets", "evidence": [{"doc_id": "d3", "grade": 1}]},
        {"id": "q4", "text": "nothing judged"},
    ]
    data = native(tmp_path, questions, docs)
    config = write(
        tmp_path / "c.yaml",
        yaml.safe_dump(
            {
                "dataset": {"path": str(data)},
                "retrieval": {"mode": "bm25", "top_k": 2},
                "evaluation": {"ks": [1, 2]},
                "cache_dir": str(tmp_path / "cache"),
            }
        ),
    )
    assert main(["eval", str(config)]) == 2
    assert "corpus.jsonl:2 [text]: document 'd2' has empty text" in capsys.readouterr().err
    assert main(["eval", str(config), "--lenient"]) == 0
    out = capsys.readouterr().out
    assert "2 questions (1 without relevant evidence, excluded)" in out  # q1, q3 scored; q4 has no judgment
    assert "--lenient dropped 1 question(s), 1 document(s) and 0 unreadable line(s):" in out
    assert "  document d2" in out and "  question q2 (" in out and "cites invalid document 'd2'" in out


# -- overlapping evidence and truncation ------------------------------------------------------


def overlap_config(tmp_path: Path, merge: bool) -> Path:
    text = "The answer sits right here in the first part. " + "Filler text that answers nothing at all. " * 6
    docs = [{"id": "d1", "text": text}, {"id": "d2", "text": "Another document about nothing in particular."}]
    q = {
        "id": "q1",
        "text": "where is the answer",
        "evidence": [
            {"doc_id": "d1", "grade": 1, "start": 4, "end": 40},
            {"doc_id": "d1", "grade": 2, "start": 10, "end": 44},
        ],
    }
    data = native(tmp_path / str(merge), [q], docs)
    config = {
        "dataset": {"path": str(data), "merge_overlapping_evidence": merge},
        "chunking": {"strategy": "fixed", "unit": "chars", "size": 50, "overlap": 0},
        "retrieval": {"mode": "bm25", "top_k": 10, "candidates": 10, "bm25": {"stemming": "none"}},
        "evaluation": {"ks": [10]},
        "cache_dir": str(tmp_path / "cache"),
    }
    return write(tmp_path / f"{merge}.yaml", yaml.safe_dump(config))


def test_overlapping_evidence_is_merged_at_the_highest_grade(tmp_path):
    merged = load_config(overlap_config(tmp_path, True))
    result = Pipeline(merged.cache_dir).run(merged)
    assert result.run.ids[0, 0] == 0  # the first chunk [0, 50) holds both copies of the answer
    assert result.scores.values["ndcg@10"][0] == pytest.approx(1.0)
    assert any("1 overlapping evidence span(s) were merged" in w for w in result.warnings)
    apart = load_config(overlap_config(tmp_path, False))
    kept = Pipeline(apart.cache_dir).run(apart)
    # two items (grades 1 and 2), one chunk credits one of them at rank 1: by hand 2 / (2 + 1 / log2(3))
    assert kept.scores.values["ndcg@10"][0] == pytest.approx(2 / (2 + 1 / math.log2(3)))
    assert not kept.warnings


def test_dense_truncation_is_counted_warned_and_logged(tmp_path):
    from sentence_transformers import SentenceTransformer

    from sweep.models import resolve_model

    docs = [
        {"id": f"d{i}", "text": ("word " * (4 + 6 * i)).strip()} for i in range(5)
    ]  # 4, 10, ..., 28 words
    data = native(tmp_path, [{"id": "q1", "text": "word", "evidence": [{"doc_id": "d0", "grade": 1}]}], docs)
    config = write(
        tmp_path / "c.yaml",
        yaml.safe_dump(
            {
                "dataset": {"path": str(data), "include_title": False},
                "chunking": {"strategy": "document"},
                "retrieval": {"mode": "dense", "top_k": 5, "candidates": 5, "dense": {"max_seq_length": 16}},
                "evaluation": {"ks": [5]},
                "cache_dir": str(tmp_path / "cache"),
            }
        ),
    )
    c = load_config(config)
    result = Pipeline(c.cache_dir).run(c)
    tokenizer = SentenceTransformer(resolve_model("minilm-l6"), device="cpu").tokenizer
    by_hand = np.mean([len(tokenizer(d["text"])["input_ids"]) > 16 for d in docs])  # [CLS] word... [SEP]
    assert by_hand == 0.6 and result.dense_truncated_share == pytest.approx(by_hand)
    assert any(
        w.startswith("60% of the chunks (whole documents) are longer than minilm-l6's max_seq_length")
        for w in result.warnings
    )
    again = Pipeline(c.cache_dir).run(c)  # from the cache, no tokenizer pass
    assert again.dense_truncated_share == pytest.approx(by_hand)


# -- caches, pipes ------------------------------------------------------------------------------


def test_a_full_disk_is_one_line_naming_cache_dir(tmp_path, capsys, monkeypatch):
    import sweep.cache

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    data = native(tmp_path, [Q1, Q2])
    config = write(
        tmp_path / "c.yaml",
        yaml.safe_dump(
            {
                "dataset": {"path": str(data)},
                "retrieval": {"mode": "bm25", "top_k": 2},
                "evaluation": {"ks": [1]},
                "cache_dir": str(tmp_path / "cache"),
            }
        ),
    )
    monkeypatch.setattr(sweep.cache.os, "fsync", full)
    assert main(["eval", str(config)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: cache_dir: cannot write ")
        and "No space left on device" in err
        and err.count("\n") == 1
    )
    assert not list((tmp_path / "cache").rglob("*.tmp"))  # nothing half-written left behind


def test_a_corrupt_plugin_query_cache_is_recomputed(tmp_path, monkeypatch):
    from sweep.retrieval.query import plugin_queries

    calls = []
    module = type(sys)("trap_plugin")
    module.rewrite = lambda text: calls.append(text) or [text, text + " again"]
    monkeypatch.setitem(sys.modules, "trap_plugin", module)
    assert plugin_queries("trap_plugin:rewrite", ["a", "b"], str(tmp_path)) == [
        ["a", "a again"],
        ["b", "b again"],
    ]
    entries = sorted((tmp_path / "queries").rglob("*.json"))
    entries[0].write_bytes(b'["a", "a ag')  # truncated by a kill
    entries[1].write_bytes(b"\xff\xfe")
    assert plugin_queries("trap_plugin:rewrite", ["a", "b"], str(tmp_path)) == [
        ["a", "a again"],
        ["b", "b again"],
    ]
    assert len(calls) == 4  # both recomputed, once each


def test_a_closed_pipe_is_not_a_traceback(tmp_path):
    write(tmp_path / "q.txt", "".join(f"q{i} 0 d{i} 1\n" for i in range(3000)))
    write(tmp_path / "r.txt", "".join(f"q{i} Q0 d{i} 1 1.0 t\n" for i in range(3000)))
    proc = subprocess.run(
        f"{sys.executable} -m sweep score --qrels q.txt --run r.txt --k 1 --json /dev/stdout | head -c 100",
        shell=True,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, (
        proc.stderr
    )
    assert len(proc.stdout) == 100
