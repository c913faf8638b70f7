"""The configuration of one retrieval setup: the typed schema and its YAML loader."""
