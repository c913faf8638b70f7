"""One configuration run end to end: the cached stage runner, its result type and ``evaluate_config``."""
