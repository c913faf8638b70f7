"""Fuzzing: whatever bytes or mutated structures reach the config parser and the loaders,
the result is a valid object or our own error type, never another exception."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweep.config.load import build_config, load_config
from sweep.config.schema import EvalConfig
from sweep.data import EvalSet, load_beir, load_native, load_span_csv
from sweep.errors import SweepError
from sweep.tuning.search import SearchConfig, parse_search

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)

VALID = {
    "dataset": {"loader": "native", "path": "data", "split": None, "max_questions": 5},
    "chunking": {"strategy": "fixed", "size": 100, "overlap": 10, "unit": "tokens", "tokenizer": "word"},
    "retrieval": {
        "mode": "hybrid",
        "candidates": 50,
        "top_k": 10,
        "bm25": {"k1": 0.9, "b": 0.4},
        "dense": {"model": "minilm-l6"},
        "fusion": {"method": "rrf", "alpha": 0.3, "rrf_k": 60},
        "rerank": {"enabled": False, "depth": 20},
    },
    "evaluation": {"ks": [1, 5, 10], "hit_min_overlap": 0.5},
}
SEARCH = {
    "objective": "ndcg@10",
    "trials": 5,
    "holdout": {"fraction": 0.3},
    "space": {
        "retrieval.fusion.alpha": {"float": [0, 1], "step": 0.1},
        "chunking.size": {"categorical": [100, 200]},
    },
}


def leaf_paths(data, prefix=()):
    if isinstance(data, dict):
        for k, v in data.items():
            yield from leaf_paths(v, prefix + (k,))
    yield prefix


@st.composite
def mutated(draw, base: dict):
    """Replace, delete or add keys at random places of a valid structure."""
    data = json.loads(json.dumps(base))
    paths = [p for p in leaf_paths(data) if p]
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths))
        node = data
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                break
        if not isinstance(node, dict):
            continue
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            node[path[-1]] = draw(json_value)
        elif action == "delete":
            node.pop(path[-1], None)
        else:
            node[draw(st.text(max_size=8))] = draw(json_value)
    return data


def ours_or_valid(fn, *args, expect=object):
    try:
        result = fn(*args)
    except SweepError:
        return
    assert isinstance(result, expect)


@FUZZ
@given(st.binary(max_size=400))
def test_config_file_of_arbitrary_bytes(raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.yaml"
        path.write_bytes(raw)
        ours_or_valid(load_config, path, expect=EvalConfig)


@FUZZ
@given(mutated(VALID))
def test_mutated_config(data):
    ours_or_valid(build_config, data, "c.yaml", expect=EvalConfig)
    with tempfile.TemporaryDirectory() as tmp:  # and through YAML text, as a user would write it
        path = Path(tmp) / "c.yaml"
        path.write_text(yaml.safe_dump(data))
        ours_or_valid(load_config, path, expect=EvalConfig)


@FUZZ
@given(mutated(SEARCH))
def test_mutated_search_section(data):
    ours_or_valid(parse_search, data, "c.yaml", expect=SearchConfig)


@FUZZ
@given(mutated(VALID), st.lists(st.text(max_size=30), max_size=3))
def test_overrides(data, overrides):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.yaml"
        path.write_text(yaml.safe_dump(data))
        ours_or_valid(load_config, path, [o if "=" in o else o + "=1" for o in overrides], expect=EvalConfig)


GOOD_DOC = {"id": "d1", "text": "Lists are mutable sequences.", "title": "Lists"}
GOOD_Q = {"id": "q1", "text": "mutable?", "evidence": [{"doc_id": "d1", "grade": 1, "quote": "mutable"}]}


def native(tmp: Path, corpus: bytes, questions: bytes) -> Path:
    (tmp / "corpus.jsonl").write_bytes(corpus)
    (tmp / "questions.jsonl").write_bytes(questions)
    return tmp


@FUZZ
@given(st.binary(max_size=300), st.binary(max_size=300), st.booleans())
def test_native_files_of_arbitrary_bytes(corpus, questions, lenient):
    with tempfile.TemporaryDirectory() as tmp:
        ours_or_valid(
            lambda: load_native(native(Path(tmp), corpus, questions), lenient=lenient), expect=EvalSet
        )


@FUZZ
@given(
    st.lists(mutated(GOOD_DOC), min_size=1, max_size=3), st.lists(mutated(GOOD_Q), max_size=3), st.booleans()
)
def test_native_mutated_records(docs, questions, lenient):
    def lines(items):
        return "\n".join(json.dumps(i, allow_nan=True) for i in items).encode()

    with tempfile.TemporaryDirectory() as tmp:
        ours_or_valid(
            lambda: load_native(native(Path(tmp), lines(docs), lines(questions)), lenient=lenient),
            expect=EvalSet,
        )


@FUZZ
@given(st.binary(max_size=200), st.binary(max_size=200), st.text(max_size=120), st.booleans())
def test_beir_of_arbitrary_content(corpus, queries, qrels, lenient):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "qrels").mkdir()
        (root / "corpus.jsonl").write_bytes(b'{"_id": "d1", "title": "T", "text": "body"}\n' + corpus)
        (root / "queries.jsonl").write_bytes(b'{"_id": "q1", "text": "query"}\n' + queries)
        (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n" + qrels)
        ours_or_valid(lambda: load_beir(root, "test", lenient=lenient), expect=EvalSet)


@FUZZ
@given(st.text(max_size=150), st.text(max_size=12), st.text(max_size=60), st.booleans())
def test_span_csv_of_arbitrary_content(references, corpus_id, corpus_text, lenient):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "corpora").mkdir()
        (root / "corpora" / "c.md").write_text(corpus_text or "x")
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["question", "references", "corpus_id"])
        w.writerow(["what?", references, corpus_id or "c"])
        (root / "q.csv").write_text(buf.getvalue())
        ours_or_valid(lambda: load_span_csv(root / "q.csv", lenient=lenient), expect=EvalSet)


BOM = b"\xef\xbb\xbf"
VALID_YAML = yaml.safe_dump(
    {**VALID, "dataset": {"loader": "native", "path": "data"}}, sort_keys=False
).encode()


@FUZZ
@given(
    st.booleans(),
    st.integers(0, len(VALID_YAML)),
    st.binary(min_size=1, max_size=3),
    st.sampled_from(
        ["", "retrieval: {mode: bm25}\n", "dataset: {path: other}\n", "chunking:\n  size: 50\n  size: 60\n"]
    ),
)
def test_config_with_a_bom_bad_bytes_or_duplicate_keys(bom, cut, junk, repeated):
    """A BOM changes nothing; a stray byte or a repeated key is our error, never a silently different config."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.yaml"
        path.write_bytes((BOM if bom else b"") + VALID_YAML + repeated.encode())
        try:
            config = load_config(path)
            assert not repeated.strip()  # a repeated section is never accepted
            assert config.retrieval.fusion.method == "rrf" and config.chunking.size == 100
        except SweepError as e:
            assert repeated.strip() and "appears twice" in str(e)
        path.write_bytes(VALID_YAML[:cut] + junk + VALID_YAML[cut:])
        ours_or_valid(load_config, path, expect=EvalConfig)


@FUZZ
@given(st.booleans(), st.binary(max_size=40), st.booleans())
def test_eval_set_and_trec_files_with_a_bom_or_bad_bytes(bom, junk, lenient):
    """With a BOM the first record keeps its id; bytes that are not UTF-8 are an error naming a line."""
    from sweep.metrics.trec import score

    head = BOM if bom else b""
    corpus = head + b'{"id": "d1", "text": "Lists are mutable."}\n' + junk
    questions = head + b'{"id": "q1", "text": "mutable?", "evidence": [{"doc_id": "d1", "grade": 1}]}\n'
    with tempfile.TemporaryDirectory() as tmp:
        try:
            eval_set = load_native(native(Path(tmp), corpus, questions), lenient=lenient)
            assert eval_set.documents[0].id == "d1" and [q.id for q in eval_set.questions] == ["q1"]
        except SweepError as e:
            assert junk and ("corpus.jsonl" in str(e))
        (Path(tmp) / "q.txt").write_bytes(head + b"q1 0 d1 1\n")
        (Path(tmp) / "r.txt").write_bytes(head + b"q1 Q0 d1 1 1.0 t\n" + junk)
        try:
            scores = score(Path(tmp) / "q.txt", Path(tmp) / "r.txt", ["mrr"])
            assert scores.question_ids == ["q1"]
        except SweepError as e:
            assert junk and "r.txt" in str(e)
