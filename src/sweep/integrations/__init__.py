"""The tuned retriever inside the frameworks applications ship with (each an optional extra).

* ``pip install rag-sweep[langchain]``: :class:`sweep.integrations.langchain.SweepRetriever`
* ``pip install rag-sweep[llamaindex]``: :class:`sweep.integrations.llamaindex.SweepRetriever`
"""
