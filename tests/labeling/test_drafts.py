"""LLM drafts: the chat-completions wire format, the exact-quote check and every failure, against a
local server that speaks the protocol (no model, no claim about quality)."""

from __future__ import annotations

import json

import pytest
from test_label_page import api

from conftest import start_chat_server
from sweep.data.model import Document
from sweep.errors import DataError
from sweep.labeling.drafts import PROMPT, DraftClient
from sweep.labeling.server import LabelSession, serve_in_thread
from sweep.labeling.store import JudgmentStore
from sweep.llm import LLMError

PASSAGE = "Run the installer, then restart the shell. The installer needs admin rights."


def draft_reply(body: dict):
    """Answers by what the passage says."""
    passage = body["messages"][-1]["content"]
    if "boom" in passage:
        return 500, b"model overloaded"
    if "paraphrase" in passage:
        return '{"question": "Why?", "quote": "words that are not there"}'
    if "prose" in passage:
        return (
            "Sure! Here it is:\n```json\n"
            + json.dumps({"question": "What is prose?", "quote": "prose"})
            + "\n```"
        )
    if "garbage" in passage:
        return "I cannot help with that."
    return json.dumps({"question": "What do I do after installing?", "quote": "restart the shell"})


@pytest.fixture
def chat(monkeypatch):
    """A fake endpoint (see draft_reply); records each request it got."""
    url, seen, stop = start_chat_server(draft_reply)
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test")
    yield url, seen
    stop()


def test_the_request_is_chat_completions_and_the_quote_is_located(chat):
    url, seen = chat
    draft = DraftClient(url, "local-model", key_env="TEST_LLM_KEY").draft("install.md", 100, PASSAGE)
    assert draft.question == "What do I do after installing?"
    assert (draft.start, draft.end) == (
        100 + PASSAGE.index("restart the shell"),
        100 + PASSAGE.index("restart the shell") + 17,
    )
    request = seen[0]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "local-model"
    assert request["body"]["messages"] == [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": PASSAGE},
    ]


def test_json_wrapped_in_prose_is_read_and_no_key_sends_no_header(chat, monkeypatch):
    url, seen = chat
    monkeypatch.delenv("TEST_LLM_KEY")
    assert DraftClient(url, "m", key_env="TEST_LLM_KEY").draft("d", 0, "some prose here").quote == "prose"
    assert seen[-1]["auth"] is None


@pytest.mark.parametrize(
    "passage,says",
    [
        ("a paraphrase case", "not in the passage word for word"),
        ("boom", "HTTP 500: model overloaded"),
        ("garbage", "not {question, quote} JSON"),
    ],
)
def test_failures_are_one_reason_each(chat, passage, says):
    with pytest.raises(LLMError, match=says.replace("{", r"\{").replace("}", r"\}")):
        DraftClient(chat[0], "m").draft("d", 0, passage)


def test_an_endpoint_that_is_not_there_is_a_clear_error():
    with pytest.raises(LLMError, match="did not answer"):
        DraftClient("http://127.0.0.1:9/v1", "m", timeout=5).draft("d", 0, PASSAGE)


def test_a_draft_enters_the_eval_set_only_when_accepted_and_is_marked(chat, tmp_path):
    docs = [Document("install.md", PASSAGE), Document("bad.md", "a paraphrase case")]
    store = JudgmentStore(tmp_path / "s", docs)
    samples = iter([[("install.md", 0, len(PASSAGE)), ("bad.md", 0, 17)]])
    session = LabelSession(store, {}, drafter=DraftClient(chat[0], "m"), sample=lambda n: next(samples))
    url, stop = serve_in_thread(session)
    try:
        offered = api(url, "/api/draft", {"count": 2})
        assert len(offered["drafts"]) == 1 and "bad.md#0-17" in offered["problems"][0]
        assert (tmp_path / "s" / "questions.jsonl").read_text() == ""  # offered is not accepted
        qid = api(
            url, "/api/accept", {"draft": offered["drafts"][0]["id"], "text": "After installing, what then?"}
        )["id"]
    finally:
        stop()
    [line] = [json.loads(x) for x in (tmp_path / "s" / "questions.jsonl").read_text().splitlines()]
    assert (
        line["id"] == qid
        and line["text"] == "After installing, what then?"
        and line["metadata"] == {"drafted": True}
    )
    assert line["evidence"] == [
        {"doc_id": "install.md", "grade": 2, "start": 24, "end": 41, "quote": "restart the shell"}
    ]


def test_without_an_endpoint_drafting_is_refused_and_the_rest_works(tmp_path):
    store = JudgmentStore(tmp_path / "s", [Document("install.md", PASSAGE)])
    url, stop = serve_in_thread(LabelSession(store, {}))
    try:
        assert api(url, "/api/state")["drafting"] is False
        with pytest.raises(Exception, match="400"):
            api(url, "/api/draft", {"count": 1})
        assert api(url, "/api/question", {"text": "How do I install it?"})["id"] == "new-1"
    finally:
        stop()


def test_the_scale_is_configurable_and_grades_off_it_are_refused(tmp_path, capsys):
    from sweep.cli import build_parser

    args = build_parser().parse_args(["label", "c.yaml", "--scale", "0=no,3=perfect"])
    assert args.scale == {0: "no", 3: "perfect"}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["label", "c.yaml", "--scale", "1=yes"])  # no "not relevant" grade
    assert "needs grade 0" in capsys.readouterr().err
    store = JudgmentStore(tmp_path / "s", [Document("install.md", PASSAGE)], grades=(0, 3))
    store.add_question("How?", "q")
    assert store.judge("q", "install.md", 0, 3, 3).grade == 3
    with pytest.raises(ValueError, match="not on the scale"):
        store.judge("q", "install.md", 0, 3, 2)


def test_a_port_in_use_is_one_line_not_a_traceback(tmp_path):
    import socket
    import subprocess
    import sys

    from test_label_page import corpus

    config = corpus(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "sweep",
                "label",
                str(config),
                "--port",
                str(port),
                "--pool-modes",
                "bm25",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "--port 0" in out.stderr


def test_a_line_cut_by_a_kill_is_dropped_and_the_log_stays_appendable(tmp_path):
    docs = [Document("install.md", PASSAGE)]
    store = JudgmentStore(tmp_path / "s", docs)
    store.add_question("How?", "q")
    store.judge("q", "install.md", 0, 3, 1)
    with open(tmp_path / "s" / "log.jsonl", "ab") as fh:
        fh.write(b'{"kind": "judgment", "id": 2, "quest')  # the kill came mid-write: never acknowledged
    reopened = JudgmentStore(tmp_path / "s", docs)
    assert [j.id for j in reopened.judgments_of("q")] == [1]
    assert reopened.judge("q", "install.md", 4, 7, 2).id == 2  # appends on a clean line
    assert [j.id for j in JudgmentStore(tmp_path / "s", docs).judgments_of("q")] == [1, 2]


def test_a_judged_document_that_changed_since_is_one_error_and_the_corpus_is_kept(tmp_path):
    store = JudgmentStore(tmp_path / "s", [Document("install.md", PASSAGE), Document("other.md", "x y z")])
    store.add_question("How?", "q")
    store.judge("q", "install.md", 0, 3, 1)
    assert [json.loads(x)["id"] for x in (tmp_path / "s" / "corpus.jsonl").read_text().splitlines()] == [
        "install.md",
        "other.md",
    ]
    JudgmentStore(
        tmp_path / "s", [Document("install.md", PASSAGE), Document("other.md", "changed")]
    )  # unjudged: fine
    with pytest.raises(DataError, match="changed or gone since they were judged: install.md"):
        JudgmentStore(tmp_path / "s", [Document("install.md", "Rewritten text.")])
