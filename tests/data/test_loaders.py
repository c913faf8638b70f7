"""Loaders on the real data in ../shared/data, and malformed files with their messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.data import load_beir, load_native, load_span_csv
from sweep.errors import DataError


def test_scifact_counts(shared_data):
    ds = load_beir(shared_data / "scifact", "test")
    assert len(ds.documents) == 5183
    assert len(ds.questions) == 300
    assert sum(len(q.evidence) for q in ds.questions) == 339
    assert all(e.grade == 1 and e.start is None for q in ds.questions for e in q.evidence)
    assert ds.documents[0].title  # titles are kept apart from the text


def test_chroma_counts_and_every_span_quotes_its_corpus(shared_data):
    root = shared_data / "chroma-chunking"
    ds = load_span_csv(root / "questions_df.csv")
    assert len(ds.questions) == 472
    assert sum(len(q.evidence) for q in ds.questions) == 790
    assert sorted(d.id for d in ds.documents) == [
        "chatlogs",
        "finance",
        "pubmed",
        "state_of_the_union",
        "wikitexts",
    ]
    # the loader checked each span against the quoted content; check again independently
    import csv

    texts = {d.id: d.text for d in ds.documents}
    with open(root / "questions_df.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row, q in zip(rows, ds.questions):
        refs = json.loads(row["references"])
        for ref, ev in zip(refs, q.evidence):
            assert texts[row["corpus_id"]][ev.start : ev.end] == ref["content"]


# --- native JSONL -------------------------------------------------------------


def write_native(tmp_path: Path, docs: list, questions: list) -> Path:
    def dump(rows):
        return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n"

    (tmp_path / "corpus.jsonl").write_text(dump(docs))
    (tmp_path / "questions.jsonl").write_text(dump(questions))
    return tmp_path


DOCS = [{"id": "d1", "text": "The quick brown fox."}, {"id": "d2", "text": "Jumps over the lazy dog."}]
GOOD_Q = {"id": "q1", "text": "what jumps?", "evidence": [{"doc_id": "d2", "grade": 2, "quote": "Jumps"}]}


def test_native_loads_and_locates_quotes(tmp_path):
    q2 = {"id": "q2", "text": "fox?", "evidence": [{"doc_id": "d1", "grade": 1, "start": 16, "end": 19}]}
    ds = load_native(write_native(tmp_path, DOCS, [GOOD_Q, q2]))
    assert ds.questions[0].evidence[0].start == 0 and ds.questions[0].evidence[0].end == 5
    assert ds.questions[1].evidence[0].span(20) == (16, 19)


def errors_of(tmp_path, docs, questions) -> str:
    with pytest.raises(DataError) as info:
        load_native(write_native(tmp_path, docs, questions))
    return str(info.value)


@pytest.mark.parametrize(
    "questions,expected",
    [
        ([GOOD_Q, GOOD_Q], "questions.jsonl:2 [id]: duplicate question id 'q1'"),
        (
            [{"id": "q", "text": "t", "evidence": [{"doc_id": "nope", "grade": 1}]}],
            "questions.jsonl:1 [evidence[0]]: question 'q' cites unknown document 'nope'",
        ),
        (
            [{"id": "q", "text": "t", "evidence": [{"doc_id": "d1", "grade": 1, "start": 5, "end": 99}]}],
            "span [5, 99) is outside document 'd1' (length 20)",
        ),
        (
            [
                {
                    "id": "q",
                    "text": "t",
                    "evidence": [{"doc_id": "d1", "grade": 1, "start": 0, "end": 3, "quote": "Teh"}],
                }
            ],
            "span [0, 3) of 'd1' reads 'The', not the quoted 'Teh'",
        ),
        (
            [{"id": "q", "text": "t", "evidence": [{"doc_id": "d1", "grade": 1, "quote": "zebra"}]}],
            "quoted text 'zebra' not found in document 'd1'",
        ),
        (
            [{"id": "q", "text": "  ", "evidence": []}],
            "questions.jsonl:1 [text]: question 'q' has empty text",
        ),
        (
            [{"id": "q", "text": "t", "evidence": [{"doc_id": "d1", "grade": 1.5}]}],
            "questions.jsonl:1 [evidence[0].grade]: expected int, got float 1.5",
        ),
        (
            [{"id": "q", "text": "t", "evidence": [{"doc_id": "d1", "grade": "2"}]}],
            "[evidence[0].grade]: expected int, got str '2'",
        ),
        (
            [{"id": "q", "text": "t", "evidence": [{"doc_id": "d1", "grade": -1}]}],
            "grade must be an integer >= 0, got -1",
        ),
        (
            [{"id": "q", "text": "t", "evidence": [{"doc_id": "d1", "grade": 1, "start": 3}]}],
            "[evidence[0].end]: give both start and end, or neither",
        ),
        (['{"id": "q", "text": '], "questions.jsonl:1: invalid JSON"),
        (["[1, 2]"], "questions.jsonl:1: expected a JSON object, got list"),
        ([{"text": "t", "evidence": []}], "questions.jsonl:1 [id]: missing required field"),
    ],
)
def test_malformed_questions(tmp_path, questions, expected):
    assert expected in errors_of(tmp_path, DOCS, questions)


def test_malformed_documents(tmp_path):
    docs = [
        {"id": "d1", "text": "a"},
        {"id": "d1", "text": "b"},
        {"id": "d3", "text": ""},
        {"id": 4, "text": "x"},
    ]
    message = errors_of(tmp_path, docs, [])
    assert "corpus.jsonl:2 [id]: duplicate document id 'd1'" in message
    assert "corpus.jsonl:3 [text]: document 'd3' has empty text" in message
    assert "corpus.jsonl:4 [id]: expected str, got int 4" in message
    assert message.startswith("3 problem(s) in the eval set (3 in ")


def test_all_problems_are_listed_not_only_the_first(tmp_path):
    bad = [{"id": f"q{i}", "text": "t", "evidence": [{"doc_id": "nope", "grade": 1}]} for i in range(30)]
    message = errors_of(tmp_path, DOCS, bad)
    assert message.startswith("30 problem(s)") and "... and 10 more" in message


def test_lenient_drops_and_reports(tmp_path):
    bad = {"id": "q2", "text": "t", "evidence": [{"doc_id": "nope", "grade": 1}]}
    ds = load_native(write_native(tmp_path, DOCS, [GOOD_Q, bad]), lenient=True)
    assert [q.id for q in ds.questions] == ["q1"]
    assert ds.dropped == [
        f"question q2 ({tmp_path / 'questions.jsonl'}:2): question 'q2' cites unknown document 'nope'"
    ]


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(DataError, match=r"corpus.jsonl: file not found"):
        load_native(tmp_path)


def test_not_utf8(tmp_path):
    write_native(tmp_path, DOCS, [GOOD_Q])
    (tmp_path / "corpus.jsonl").write_bytes(b'{"id": "d1", "text": "caf\xe9"}\n')
    with pytest.raises(
        DataError, match=r"corpus.jsonl:1: not UTF-8 text \(byte 0xe9\); save the file as UTF-8"
    ):
        load_native(tmp_path)


# --- BEIR and span CSV ------------------------------------------------------------


def write_beir(tmp_path: Path, qrels: str) -> Path:
    (tmp_path / "qrels").mkdir(exist_ok=True)
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "body"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "query"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return tmp_path


@pytest.mark.parametrize(
    "qrels,expected",
    [
        ("q1\td1\tx\n", "test.tsv:2 [score]: grade 'x' is not an integer"),
        ("q1\td1\n", "test.tsv:2: expected 3 tab-separated columns, got 2"),
        ("q9\td1\t1\n", "qrels name query 'q9', which queries.jsonl does not have"),
        ("q1\td9\t1\n", "question 'q1' cites unknown document 'd9'"),
        ("q1\td1\t1\nq1\td1\t1\n", "test.tsv:3: duplicate qrel for query 'q1', document 'd1'"),
    ],
)
def test_malformed_beir(tmp_path, qrels, expected):
    with pytest.raises(DataError) as info:
        load_beir(write_beir(tmp_path, qrels))
    assert expected in str(info.value)


def test_beir_missing_split(tmp_path):
    with pytest.raises(DataError, match=r"qrels/dev.tsv: file not found"):
        load_beir(write_beir(tmp_path, "q1\td1\t1\n"), "dev")


def write_spans(tmp_path: Path, references: str, corpus_id: str = "c") -> Path:
    (tmp_path / "corpora").mkdir(exist_ok=True)
    (tmp_path / "corpora" / "c.md").write_text("Hello world. Goodbye world.")
    import csv

    with open(tmp_path / "q.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["question", "references", "corpus_id"])
        w.writerow(["what?", references, corpus_id])
    return tmp_path / "q.csv"


@pytest.mark.parametrize(
    "references,corpus_id,expected",
    [
        ('[{"content": "Hello", "start_index": 0, "end_index": 5}]', "c", None),
        (
            '[{"content": "Hullo", "start_index": 0, "end_index": 5}]',
            "c",
            "reads 'Hello', not the quoted 'Hullo'",
        ),
        (
            '[{"content": "x", "start_index": 20, "end_index": 99}]',
            "c",
            "span [20, 99) is outside document 'c'",
        ),
        ("not json", "c", "q.csv:2 [references]: references is not valid JSON"),
        ('[{"content": "Hello"}]', "c", "references must be a list of {content, start_index, end_index}"),
        ('[{"content": "Hello", "start_index": 0, "end_index": 5}]', "zz", "corpus 'zz' not found as"),
    ],
)
def test_span_csv(tmp_path, references, corpus_id, expected):
    path = write_spans(tmp_path, references, corpus_id)
    if expected is None:
        assert load_span_csv(path).questions[0].evidence[0].span(0) == (0, 5)
        return
    with pytest.raises(DataError) as info:
        load_span_csv(path)
    assert expected in str(info.value)
