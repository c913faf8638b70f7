"""sweep label: the judging page in real headless Chromium, and judgments that survive SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from browser import Browser
from conftest import ROOT
from sweep import load_files, load_native

DOCS_SCREENSHOT = ROOT / "docs" / "label-page.png"
INSTALL = "# Install\n\nRun the installer, then restart the shell. The installer needs admin rights.\n"
CACHE = (
    "<html><head><title>Cache</title></head><body><h1>Cache</h1><p>The cache is shared between workers. "
    "Each worker locks it when it writes.</p><p>Old entries are evicted after a week.</p></body></html>"
)


def corpus(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "install.md").write_text(INSTALL)
    (docs / "cache.html").write_text(CACHE)
    (docs / "tokens.txt").write_text("Tokens are counted per word piece. A long document is truncated.\n")
    (tmp_path / "q.csv").write_text("question\nHow do I install it?\n")
    config = tmp_path / "c.yaml"
    config.write_text(
        "dataset: {loader: files, path: docs, questions: q.csv}\n"
        "chunking: {strategy: fixed, size: 8, overlap: 0, unit: tokens}\n"
        f"retrieval: {{mode: bm25, top_k: 5}}\ncache_dir: {tmp_path / 'cache'}\n"
    )
    return config


def start_server(config: Path, session: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweep",
            "label",
            str(config),
            "--port",
            "0",
            "--pool-modes",
            "bm25",
            "--out",
            str(session),
        ],
        cwd=config.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        if line.startswith("judging page: "):
            return proc, line.split()[2]
        if time.monotonic() > deadline:
            break
    proc.kill()
    pytest.fail("the label server printed no URL")


def api(url: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path.lstrip("/"), data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


CHAR_BOX = """((offset, edge) => {
  const box = document.getElementById('doc-text'), walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
  let total = 0;
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    if (offset < total + t.textContent.length) {
      const r = document.createRange(); r.setStart(t, offset - total); r.setEnd(t, offset - total + 1);
      const b = r.getBoundingClientRect(); return [edge === 'left' ? b.left + 0.5 : b.right - 0.5, b.top + b.height / 2];
    }
    total += t.textContent.length;
  }
  return null;
})"""


def test_judging_in_the_browser_with_mouse_and_keys_is_kept_and_scored(tmp_path):
    config, session = corpus(tmp_path), tmp_path / "session"
    proc, url = start_server(config, session)
    browser = Browser(tmp_path / "profile", size="1300,900")
    try:
        browser.goto(url)
        assert browser.wait_for("document.querySelectorAll('#question-list li').length === 1", 30)
        assert browser.click("document.getElementById('new-question')")
        browser.type_text("Is the cache shared between workers?")
        browser.press("Enter")
        assert browser.wait_for("document.querySelectorAll('#question-list li').length === 2", 60)
        assert browser.wait_for(
            "document.getElementById('question-text').textContent.includes('cache shared')"
        )
        state = api(url, "/api/state")
        added = next(q for q in state["questions"] if q["text"].startswith("Is the cache"))
        cache_text = api(url, "/api/document?id=cache.html")["text"]
        phrase = "shared between workers"
        at = cache_text.index(phrase)
        target = next(
            i
            for i, p in enumerate(added["pool"])
            if p["doc_id"] == "cache.html" and p["start"] <= at < p["end"]
        )
        other = next(i for i in range(len(added["pool"])) if i != target)

        assert browser.click(f"document.querySelector('.chip[data-index=\"{target}\"]')")
        assert browser.wait_for("document.getElementById('doc-title').textContent.startsWith('Cache')")
        start = browser.js(f"{CHAR_BOX}({at}, 'left')")
        end = browser.js(f"{CHAR_BOX}({at + len(phrase) - 1}, 'right')")
        browser.drag(start, end)
        assert browser.js("window.getSelection().toString()") == phrase  # the mouse selected exactly it
        browser.press("2")
        assert browser.wait_for(
            "document.getElementById('status').textContent.startsWith('saved: answers it')"
        )
        assert browser.click(f"document.querySelector('.chip[data-index=\"{other}\"]')")
        browser.press("n")
        assert browser.wait_for(
            "document.getElementById('status').textContent.startsWith('saved: not relevant')"
        )
        browser.press("e")  # edit the question: the keyboard opens the field, typing replaces it
        assert browser.wait_for("!document.getElementById('edit').hidden")
        browser.js("document.getElementById('edit-text').select()")
        browser.type_text("Is the cache shared between all workers?")
        browser.press("Enter")
        assert browser.wait_for("document.getElementById('status').textContent === 'saved: question edited'")
        shot = tmp_path / "label-page.png"
        browser.screenshot(shot)

        browser.reload()
        assert browser.wait_for("document.querySelectorAll('#question-list li').length === 2", 30)
        assert browser.click(
            "[...document.querySelectorAll('#question-list li')].find(li => li.textContent.includes('cache shared'))"
        )
        chips = browser.js("[...document.querySelectorAll('.chip')].map(c => c.textContent)")
        assert f"{target + 1} · answers it" in chips and f"{other + 1} · not relevant" in chips
        assert browser.js("document.getElementById('overall').textContent").startswith("2 / ")
        assert (
            browser.js("document.getElementById('question-text').textContent")
            == "Is the cache shared between all workers?"
        )
    finally:
        browser.close()
        proc.terminate()
        proc.wait(timeout=30)
    assert shot.stat().st_size > 20_000
    if os.environ.get("RAG_SWEEP_UPDATE_DOCS"):
        shutil.copy(shot, DOCS_SCREENSHOT)

    judged = load_native(session)  # the session folder is a native eval set: corpus.jsonl + questions.jsonl
    assert judged.questions == load_files(tmp_path / "docs", session / "questions.jsonl").questions
    q = next(q for q in judged.questions if q.id == added["id"])
    passage = added["pool"][other]
    assert [(e.doc_id, e.start, e.end) for e in q.evidence if e.grade == 0] == [
        (passage["doc_id"], passage["start"], passage["end"])
    ]  # "n" judged the whole passage
    relevant = next(e for e in q.evidence if e.grade == 2)
    assert (relevant.doc_id, relevant.start, relevant.end) == ("cache.html", at, at + len(phrase))

    scored = tmp_path / "scored.yaml"
    scored.write_text(
        config.read_text().replace("questions: q.csv", f"questions: {session / 'questions.jsonl'}")
    )
    out = subprocess.run(
        [sys.executable, "-m", "sweep", "eval", str(scored), "--json", str(tmp_path / "s.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    values = json.loads((tmp_path / "s.json").read_text())["per_question"][added["id"]]
    assert values["judged@5"] > 0 and "bpref" in values


def test_every_acknowledged_judgment_survives_a_sigkill(tmp_path):
    config, session = corpus(tmp_path), tmp_path / "session"
    proc, url = start_server(config, session)
    acknowledged = []
    try:
        q = api(url, "/api/state")["questions"][0]
        text = api(url, "/api/document?id=install.md")["text"]
        for i in range(12):
            start = (i * 5) % (len(text) - 10)
            j = api(
                url,
                "/api/judgment",
                {
                    "question": q["id"],
                    "doc_id": "install.md",
                    "start": start,
                    "end": start + 7,
                    "grade": i % 3,
                },
            )
            acknowledged.append((j["id"], start, start + 7, i % 3))
            if i == 7:  # removals are durable too
                api(url, "/api/remove", {"id": acknowledged.pop(3)[0]})
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    lines = [json.loads(line) for line in (session / "questions.jsonl").read_text().splitlines()]
    on_disk = sorted((e["start"], e["end"], e["grade"]) for e in lines[0]["evidence"])
    assert on_disk == sorted((s, e, g) for _, s, e, g in acknowledged)
    proc, url = start_server(config, session)  # reopening resumes from the log
    try:
        judgments = api(url, "/api/state")["questions"][0]["judgments"]
        assert sorted(j["id"] for j in judgments) == sorted(a[0] for a in acknowledged)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
