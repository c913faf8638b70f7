"""hyde and llm_multi_query through a local server that speaks the chat-completions protocol (wire
format, caching and refusal only; no model, no claim about quality)."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import QUESTIONS, TOPICS, start_chat_server
from sweep.config.load import load_config
from sweep.errors import ConfigError
from sweep.pipeline.runner import Pipeline
from sweep.retrieval.query import HYDE_PROMPT
from sweep.tuning.sweep_config import load_sweep_config

TARGET = {text: doc for _, text, doc in QUESTIONS}


def llm_reply(body: dict) -> str:
    """HyDE: the target document's own text as the 'answer'; multi-query: numbered rewrites."""
    system, question = body["messages"][0]["content"], body["messages"][1]["content"]
    if system == HYDE_PROMPT:
        return TOPICS[TARGET[question]]
    words = TOPICS[TARGET[question]].split()
    return f"1. {' '.join(words[:4])}\n2) {' '.join(words[4:8])}\n- {question}"


@pytest.fixture
def llm_server(monkeypatch):
    url, seen, stop = start_chat_server(llm_reply)
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test")
    yield url, seen
    stop()


def llm_overrides(url: str, transform: str, mode: str) -> list[str]:
    return [
        f"retrieval.mode={mode}",
        f"retrieval.query.transform={transform}",
        f"retrieval.query.llm={{url: '{url}', model: local, key_env: TEST_LLM_KEY, n: 2}}",
    ]


def test_hyde_embeds_the_generated_passage_and_asks_once_per_question(fixture_config, llm_server):
    url, seen = llm_server
    config = load_config(fixture_config, llm_overrides(url, "hyde", "dense"))
    plain = Pipeline(config.cache_dir, progress=False).run(
        load_config(fixture_config, ["retrieval.mode=dense"])
    )
    hyde = Pipeline(config.cache_dir, progress=False).run(config)
    assert len(seen) == len(QUESTIONS)
    assert seen[0]["path"] == "/v1/chat/completions" and seen[0]["auth"] == "Bearer sk-test"
    assert seen[0]["body"]["model"] == "local" and seen[0]["body"]["messages"][0]["content"] == HYDE_PROMPT
    assert hyde.scores.mean()["mrr"] == 1.0  # the passage is the document: found first, every time
    assert plain.scores.mean()["mrr"] < 1.0
    again = Pipeline(config.cache_dir, progress=False).run(config)  # a new process: answers from the cache
    assert len(seen) == len(QUESTIONS) and again.scores.mean() == hyde.scores.mean()


def test_llm_multi_query_parses_numbered_lines_and_fuses_the_rewrites(fixture_config, llm_server, tmp_path):
    url, seen = llm_server
    config = load_config(fixture_config, llm_overrides(url, "llm_multi_query", "bm25"))
    result = Pipeline(config.cache_dir, progress=False).run(config)
    assert len(seen) == len(QUESTIONS) and "2 different ways" in seen[0]["body"]["messages"][0]["content"]
    assert result.scores.mean()["mrr"] == 1.0  # rewrites made of the document's words
    cached = list((tmp_path / "cache" / "queries").rglob("*.json"))
    rewrites = json.loads(cached[0].read_text())
    assert len(rewrites) == 2 and not any(
        r[:2] in ("1.", "2)") for r in rewrites
    )  # numbering stripped, n kept


def test_a_sweep_over_llm_transforms_refuses_to_start_without_the_endpoint(fixture_config):
    data = yaml.safe_load(fixture_config.read_text())
    data["retrieval"]["query"] = {"llm": {"url": "http://127.0.0.1:9/v1", "model": "m"}}
    data["search"]["space"] = {"retrieval.query.transform": {"categorical": ["none", "hyde"]}}
    fixture_config.write_text(yaml.safe_dump(data))
    with pytest.raises(
        ConfigError, match=r"retrieval\.query\.llm\.url: http://127.0.0.1:9/v1 cannot be reached"
    ):
        load_sweep_config(fixture_config)
    del data["retrieval"]["query"]
    fixture_config.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="llm"):
        load_sweep_config(fixture_config)
