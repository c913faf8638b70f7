"""Figures as PNG bytes, for MLflow artifacts and the HTML report alike.

Optuna draws the study's own plots (history, importances, parallel
coordinates, contour, Pareto front); we draw only the recall@k curves.
"""

from __future__ import annotations

import io
import warnings
from typing import Callable, Sequence

import optuna

from sweep.logs import logger


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_png(fig_or_ax, size=(8, 5)) -> bytes:
    fig = fig_or_ax.get_figure() if hasattr(fig_or_ax, "get_figure") else fig_or_ax
    if hasattr(fig, "flat"):  # some optuna plots return an array of axes
        fig = fig.flat[0].get_figure()
    buf = io.BytesIO()
    fig.set_size_inches(*size)
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    _pyplot().close(fig)
    return buf.getvalue()


def recall_plot_png(curves: dict[str, Sequence[float]]) -> bytes:
    """recall@k for k = 1..len(curve), one line per configuration."""
    plt = _pyplot()
    fig, ax = plt.subplots()
    for label, curve in curves.items():
        ax.plot(range(1, len(curve) + 1), curve, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("k")
    ax.set_ylabel("recall@k")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    if len(curves) > 1:
        ax.legend()
    return figure_png(fig, size=(6, 3.6))


def study_plots(
    study: optuna.Study, objective: str, extra_objectives: Sequence[str] = ()
) -> dict[str, bytes]:
    """Optuna's plots of a study, by file name; a plot the study cannot support yet is left out."""
    from optuna.visualization import matplotlib as ov

    # a target is needed with several objectives; with one, leaving it out keeps the
    # study's direction (importance evaluators assume low targets are good)
    multi = len(study.directions) > 1
    target = {"target": lambda t: t.values[0], "target_name": objective} if multi else {}
    plots: dict[str, Callable] = {
        "optimization_history.png": lambda: ov.plot_optimization_history(study, **target),
        "parallel_coordinates.png": lambda: ov.plot_parallel_coordinate(study, **target),
    }
    if len(study.directions) == 2:
        plots["pareto_front.png"] = lambda: ov.plot_pareto_front(
            study, target_names=[objective, *extra_objectives]
        )
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    varied = {k for t in complete for k in t.params if len({str(u.params.get(k)) for u in complete}) > 1}
    if len(complete) >= 3 and len(varied) >= 2:
        plots["param_importances.png"] = lambda: ov.plot_param_importances(study, **target)
        try:
            importance = optuna.importance.get_param_importances(study, target=target.get("target"))
            top = [k for k in importance if k in varied][:2]
            if len(top) == 2:
                plots["contour.png"] = lambda: ov.plot_contour(study, params=top, **target)
        except (RuntimeError, ValueError):
            pass
    out: dict[str, bytes] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optuna marks its matplotlib plots experimental
        for name, make in plots.items():
            try:
                out[name] = figure_png(make())
            except (ValueError, RuntimeError, TypeError) as e:
                logger.warning("note: %s skipped (%s)", name, e)
    return out
