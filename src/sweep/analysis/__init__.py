"""Reading results: paired significance tests, comparisons of two runs, the held-out verdict, diagnostics."""
