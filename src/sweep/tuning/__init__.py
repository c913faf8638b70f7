"""The search: the sweep configuration, its space, the Optuna study, workers, recovery and the finish."""
