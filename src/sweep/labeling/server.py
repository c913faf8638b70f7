"""The judging page's local server: one HTML page and a small JSON API over a :class:`JudgmentStore`.

It listens on 127.0.0.1 only and opens nothing by itself. Every POST is answered only after the
change is durable on disk (see :mod:`sweep.labeling.store`), so what the page shows as saved is.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlparse

from sweep.errors import SweepError
from sweep.labeling.drafts import Draft, DraftClient
from sweep.labeling.pool import Passage
from sweep.labeling.store import JudgmentStore
from sweep.llm import LLMError
from sweep.logs import logger

SCALE = {0: "not relevant", 1: "useful", 2: "answers it"}


class LabelSession:
    """What the page works on: the store, each question's pool, and how to pool a new question.

    Args:
        store: the session on disk.
        pools: ``{question id: passages}`` already built.
        pool_one: pools a new question's text (the same retrievers); None: new questions get no pool.
        scale: grade -> its label on the page.

    Example:
        >>> serve(LabelSession(store, pools), port=0)  # doctest: +SKIP
    """

    def __init__(
        self,
        store: JudgmentStore,
        pools: dict[str, list[Passage]],
        pool_one: Callable[[str, str], list[Passage]] | None = None,
        scale: dict[int, str] | None = None,
        drafter: DraftClient | None = None,
        sample: Callable[[int], list[tuple[str, int, int]]] | None = None,
    ):
        self.store, self.pools, self.pool_one = store, pools, pool_one
        self.scale = scale or SCALE
        self.drafter, self.sample = drafter, sample
        self.drafts: dict[int, Draft] = {}  # offered, not yet accepted: in memory only

    def draft(self, count: int) -> dict[str, Any]:
        """Drafts for ``count`` sampled passages; failures come back as reasons, not errors."""
        if self.drafter is None or self.sample is None:
            raise ValueError("drafting needs an endpoint: start with --llm-url")
        offered, problems = [], []
        for doc_id, start, end in self.sample(count):
            try:
                d = self.drafter.draft(doc_id, start, self.store.documents[doc_id].text[start:end])
            except LLMError as e:
                problems.append(f"{doc_id}#{start}-{end}: {e}")
                continue
            key = len(self.drafts) + 1
            self.drafts[key] = d
            offered.append({"id": key} | d.__dict__)
        return {"drafts": offered, "problems": problems}

    def accept(self, key: int, text: str | None = None) -> str:
        """The draft enters the eval set: a question marked drafted, its quote graded at the top grade."""
        d = self.drafts.pop(key)
        qid = self.add_question(text or d.question, None, drafted=True)
        self.store.judge(qid, d.doc_id, d.start, d.end, max(self.scale))
        return qid

    def state(self) -> dict[str, Any]:
        questions = []
        for qid, text in self.store.state.questions.items():
            judgments = [j.__dict__ for j in self.store.judgments_of(qid, self.store.judge_name)]
            pool = [
                {"id": p.id, "doc_id": p.doc_id, "start": p.start, "end": p.end}
                for p in self.pools.get(qid, [])
            ]
            drafted = qid in self.store.state.drafted
            questions.append(
                {"id": qid, "text": text, "pool": pool, "judgments": judgments, "drafted": drafted}
            )
        titles = {d.id: d.title or d.id for d in self.store.documents.values()}
        return {
            "questions": questions,
            "titles": titles,
            "scale": [[g, label] for g, label in self.scale.items()],
            "drafting": self.drafter is not None,
        }

    def document(self, doc_id: str) -> dict[str, Any]:
        doc = self.store.documents[doc_id]
        return {"id": doc.id, "title": doc.title or doc.id, "text": doc.text}

    def add_question(self, text: str, qid: str | None, drafted: bool = False) -> str:
        qid = self.store.add_question(text, qid, drafted)
        if qid not in self.pools and self.pool_one is not None:
            self.pools[qid] = self.pool_one(qid, text)
        return qid


def _handler(session: LabelSession) -> type[BaseHTTPRequestHandler]:
    page = resources.files("sweep.labeling").joinpath("page.html").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args) -> None:  # requests are not news
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, value: Any) -> None:
            self._send(status, json.dumps(value, ensure_ascii=False).encode())

        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path in ("/", "/index.html"):
                self._send(200, page, "text/html; charset=utf-8")
            elif url.path == "/api/state":
                self._json(200, session.state())
            elif url.path == "/api/document":
                doc_id = parse_qs(url.query).get("id", [""])[0]
                if doc_id in session.store.documents:
                    self._json(200, session.document(doc_id))
                else:
                    self._json(404, {"error": f"no document {doc_id!r}"})
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                path = urlparse(self.path).path
                if path == "/api/question":
                    self._json(200, {"id": session.add_question(str(body["text"]), body.get("id"))})
                elif path == "/api/judgment":
                    j = session.store.judge(
                        str(body["question"]),
                        str(body["doc_id"]),
                        int(body["start"]),
                        int(body["end"]),
                        int(body["grade"]),
                    )
                    self._json(200, j.__dict__)
                elif path == "/api/draft":
                    self._json(200, session.draft(int(body.get("count", 3))))
                elif path == "/api/accept":
                    self._json(200, {"id": session.accept(int(body["draft"]), body.get("text"))})
                elif path == "/api/remove":
                    session.store.remove(int(body["id"]))
                    self._json(200, {"removed": int(body["id"])})
                else:
                    self._json(404, {"error": "not found"})
            except (KeyError, TypeError, ValueError) as e:
                self._json(400, {"error": str(e)})

    return Handler


def serve(session: LabelSession, port: int = 8765, ready: Callable[[str], None] | None = None) -> None:
    """Serve the page on 127.0.0.1 until interrupted.

    Args:
        session: what to judge.
        port: the port (0: any free one).
        ready: called with the page's URL once it listens.

    Returns:
        None, after Ctrl-C.

    Example:
        >>> serve(session, port=0, ready=print)  # doctest: +SKIP
        http://127.0.0.1:41235/
    """
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler(session))
    except OSError as e:
        raise SweepError(
            f"cannot listen on 127.0.0.1:{port} ({e.strerror}): pass --port 0 for any free port"
        ) from None
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    (ready or (lambda u: logger.info("judging page: %s", u)))(url)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def serve_in_thread(session: LabelSession, port: int = 0) -> tuple[str, Callable[[], None]]:
    """The server in a background thread (tests, notebooks): its URL and a function that stops it."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(session))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}/", stop


__all__ = ["SCALE", "LabelSession", "serve", "serve_in_thread"]
