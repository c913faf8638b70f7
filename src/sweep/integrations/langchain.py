"""A LangChain ``BaseRetriever`` over a :class:`sweep.Retriever` (``pip install rag-sweep[langchain]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as e:  # pragma: no cover - the extra is installed for the tests
    raise ImportError("the LangChain adapter needs langchain-core: pip install 'rag-sweep[langchain]'") from e

from pydantic import ConfigDict

from sweep.serving.retriever import Hit, Retriever


def hit_document(hit: Hit) -> Document:
    """A hit as a LangChain Document: the chunk's text, with where it is and its score as metadata."""
    return Document(
        page_content=hit.text,
        id=hit.chunk_id,
        metadata={
            **hit.metadata,
            "doc_id": hit.doc_id,
            "start": hit.start,
            "end": hit.end,
            "score": hit.score,
            "title": hit.title,
        },
    )


class SweepRetriever(BaseRetriever):
    """The tuned configuration as a LangChain retriever: ``invoke(question)`` returns its hits, best first.

    Args:
        retriever: the :class:`sweep.Retriever` to serve.
        k: documents per question (default: the configuration's ``retrieval.top_k``).
        filters: document metadata every result must match, e.g. ``{"lang": "en"}``.

    Example:
        >>> lc = SweepRetriever.from_config("export/best_config.yaml", k=5)
        >>> [d.metadata["doc_id"] for d in lc.invoke("what does yield do?")]
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: Retriever
    k: int | None = None
    filters: dict[str, Any] | None = None

    @classmethod
    def from_config(cls, config: str | Path, **kwargs: Any) -> "SweepRetriever":
        """Build it from a configuration file (e.g. ``sweep export``'s ``best_config.yaml``)."""
        return cls(retriever=Retriever.from_config(config), **kwargs)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [hit_document(h) for h in self.retriever.search(query, self.k, self.filters)]


__all__ = ["SweepRetriever", "hit_document"]
