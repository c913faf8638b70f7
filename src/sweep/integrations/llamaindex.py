"""A LlamaIndex ``BaseRetriever`` over a :class:`sweep.Retriever` (``pip install rag-sweep[llamaindex]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import (
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as e:  # pragma: no cover - the extra is installed for the tests
    raise ImportError(
        "the LlamaIndex adapter needs llama-index-core: pip install 'rag-sweep[llamaindex]'"
    ) from e

from sweep.serving.retriever import Hit, Retriever


def hit_node(hit: Hit) -> NodeWithScore:
    """A hit as a LlamaIndex node with its score; the node's id is the chunk id ``doc_id#start-end``."""
    node = TextNode(
        id_=hit.chunk_id,
        text=hit.text,
        start_char_idx=hit.start,
        end_char_idx=hit.end,
        metadata={**hit.metadata, "doc_id": hit.doc_id, "title": hit.title},
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.doc_id)},
    )
    return NodeWithScore(node=node, score=hit.score)


class SweepRetriever(BaseRetriever):
    """The tuned configuration as a LlamaIndex retriever: ``retrieve(question)`` returns scored nodes.

    Args:
        retriever: the :class:`sweep.Retriever` to serve.
        k: nodes per question (default: the configuration's ``retrieval.top_k``).
        filters: document metadata every result must match.

    Example:
        >>> li = SweepRetriever.from_config("export/best_config.yaml", k=5)
        >>> [n.node.ref_doc_id for n in li.retrieve("what does yield do?")]
    """

    def __init__(
        self, retriever: Retriever, k: int | None = None, filters: dict[str, Any] | None = None, **kwargs
    ):
        self.retriever, self.k, self.filters = retriever, k, filters
        super().__init__(**kwargs)

    @classmethod
    def from_config(cls, config: str | Path, **kwargs: Any) -> "SweepRetriever":
        """Build it from a configuration file (e.g. ``sweep export``'s ``best_config.yaml``)."""
        return cls(Retriever.from_config(config), **kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [hit_node(h) for h in self.retriever.search(query_bundle.query_str, self.k, self.filters)]


__all__ = ["SweepRetriever", "hit_node"]
