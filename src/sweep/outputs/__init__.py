"""What a person or a tool reads: MLflow runs, terminal text, plots."""
