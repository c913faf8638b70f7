"""The tuned retriever outside the tool: ``Retriever`` and ``sweep export``."""
