"""From unlabelled questions to judgments: pooling, the judgment store and the judging page."""
