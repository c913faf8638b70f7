"""One self-contained HTML page per study: what to ship, how sure we are, and why.

Everything comes from the Optuna storage (the trials, and the held-out
verdict the sweep stores as a study attribute), so ``sweep report STUDY``
works wherever the storage URL reaches, PostgreSQL included. Images are
inlined; the file can be mailed or attached to the MLflow parent run.
"""

from __future__ import annotations

import base64
import datetime
import html
from collections import Counter
from pathlib import Path

import optuna

from sweep.analysis.selection import SelectionEstimate
from sweep.outputs.plots import recall_plot_png, study_plots
from sweep.textfile import write_whole
from sweep.tuning.trials import best_trial

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em} h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0} td,th{padding:.25em .7em;border-bottom:1px solid #eee;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums} .muted{color:#777} img{max-width:100%}
.warn{background:#fff4e0;border-left:4px solid #f0a000;padding:.5em 1em;margin:.5em 0}
.finding{background:#eef5ff;border-left:4px solid #3b7dd8;padding:.5em 1em;margin:.5em 0}
.good{color:#16803c} .bad{color:#b3261e}
"""


def _e(x) -> str:
    return html.escape(str(x))


def _img(png: bytes | None, alt: str, id_: str) -> str:
    if not png:
        return f'<p class="muted" id="{id_}">{_e(alt)}: not available for this study yet</p>'
    data = base64.b64encode(png).decode()
    return f'<img id="{id_}" alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _f(v, digits: int = 4) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def _headline(v: dict) -> str:
    o = v["objective"]
    rows = []
    for name, b in sorted(v["best"].items(), key=lambda item: item[0] != o):  # the objective first
        base = v["baseline"].get(name)
        lo, hi = v["intervals"][name]
        cmp = v["comparison"]["metrics"].get(name, {})
        delta = cmp.get("delta")
        ci_text = f"[{cmp['ci'][0]:+.4f}, {cmp['ci'][1]:+.4f}]" if cmp else ""
        delta_text = "" if delta is None else f"{delta:+.4f}"
        cls = "" if not cmp else ("good" if cmp["ci"][0] > 0 else "bad" if cmp["ci"][1] < 0 else "")
        rows.append(
            f"<tr{' style=font-weight:600' if name == o else ''}><td>{_e(name)}</td>"
            f'<td class="num">{_f(b)}</td><td class="num muted">[{_f(lo)}, {_f(hi)}]</td>'
            f'<td class="num">{_f(base)}</td><td class="num {cls}">{delta_text}</td><td class="num muted">{ci_text}</td>'
            f'<td class="num">{_f(cmp.get("p_value"))}</td><td class="num">{_f(cmp.get("p_holm"))}</td></tr>'
        )
    warnings = "".join(f'<div class="warn">{_e(w)}</div>' for w in v.get("warnings", []))
    return (
        f'<section id="headline"><h2>Held-out result</h2><p>{_e(v["split"])}; <b>{v["n_questions"]}</b> questions '
        f"that no trial saw. Best is trial {v['best_trial']}; deltas are best − baseline, paired over questions, "
        f"bootstrap 95% intervals, randomisation-test p-values (Holm-corrected over the metrics).</p>{warnings}"
        "<table><tr><th>metric</th><th>best</th><th>95% CI</th><th>baseline</th><th>delta</th><th>95% CI of delta</th>"
        f"<th>p</th><th>p (Holm)</th></tr>{''.join(rows)}</table></section>"
    )


def _flipped(v: dict, limit: int = 25) -> str:
    changes = v["comparison"]["changes"]
    parts = [
        f'<section id="flipped"><h2>Questions that flipped</h2><p>On {_e(v["comparison"]["metric"])}, '
        "held out; rank is that of the first relevant result (– when none was retrieved).</p>"
    ]
    for title, key, cls in (("Improved", "improved", "good"), ("Regressed", "regressed", "bad")):
        rows = "".join(
            f'<tr><td>{_e(q["question_id"])}</td><td>{_e(q["text"])}</td><td class="num">{_f(q["a"], 3)}</td>'
            f'<td class="num {cls}">{_f(q["b"], 3)}</td><td class="num">{q["rank_a"] or "–"} → {q["rank_b"] or "–"}</td></tr>'
            for q in changes[key][:limit]
        )
        more = (
            f'<p class="muted">… and {len(changes[key]) - limit} more</p>'
            if len(changes[key]) > limit
            else ""
        )
        parts.append(
            f'<h3 id="{key}">{title}: {len(changes[key])}</h3><table><tr><th>id</th><th>question</th>'
            f"<th>baseline</th><th>best</th><th>rank</th></tr>{rows}</table>{more}"
        )
    return "".join(parts) + "</section>"


def _trials(study: optuna.Study) -> str:
    rows = []
    for t in study.trials:
        value = "" if not t.values else f"{t.values[0]:.4f}"
        note = (
            "baseline"
            if t.user_attrs.get("baseline")
            else (
                f"same as {t.user_attrs['duplicate_of']}"
                if "duplicate_of" in t.user_attrs
                else t.user_attrs.get("error", "")
            )
        )
        params = ", ".join(
            f"{k.rsplit('.', 1)[-1]}={v:g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]}={v}"
            for k, v in t.params.items()
        )
        rows.append(
            f'<tr><td class="num">{t.number}</td><td>{t.state.name.lower()}</td><td class="num">{value}</td>'
            f"<td>{_e(params)}</td><td class=muted>{_e(note)}</td></tr>"
        )
    return (
        '<section id="trials"><h2>All trials</h2><table><tr><th>#</th><th>state</th><th>objective</th>'
        f"<th>parameters</th><th></th></tr>{''.join(rows)}</table></section>"
    )


def build_report(study: optuna.Study, plots: dict[str, bytes] | None = None) -> str:
    objective = study.user_attrs.get("objective", "objective")
    if plots is None:
        plots = study_plots(study, objective, study.user_attrs.get("extra_objectives", []))
    verdict = study.user_attrs.get("verdict")
    tally = Counter(t.state for t in study.get_trials(deepcopy=False))
    counts = {s.name.lower(): tally[s] for s in optuna.trial.TrialState}
    best = best_trial(study)
    body = [
        f'<h1>Study {_e(study.study_name)}</h1><p class="muted">{objective} · '
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        + f" trials · generated {datetime.datetime.now():%Y-%m-%d %H:%M}</p>"
    ]
    if verdict:
        body.append(_headline(verdict))
    else:
        body.append(
            '<section id="headline"><h2>Result</h2><p class="warn">No held-out evaluation: the study tuned and '
            "was scored on the same questions (search.holdout.fraction: 0), so the best value below is optimistic.</p>"
            + (f"<p>Best trial {best.number}: {objective} = {best.values[0]:.4f}</p>" if best else "")
            + "</section>"
        )
    if selection := study.user_attrs.get("selection"):
        body.append(
            '<section id="selection"><h2>Selection-corrected estimate</h2><p>'
            + _e(SelectionEstimate(**selection).describe(objective))
            + '</p><p class="muted">Bootstrap bias-corrected selection (Tsamardinos et al. 2018): the questions '
            "are resampled, the best trial re-picked on each resample and scored on the questions it left "
            "out.</p></section>"
        )
    if best is not None:
        rows = "".join(
            f"<tr><td>{_e(k)}</td><td>{_e(f'{v:.10g}' if isinstance(v, float) else v)}</td></tr>"
            for k, v in best.params.items()
        )
        body.append(
            f'<section id="best-config"><h2>Best configuration (trial {best.number})</h2>'
            f"<table>{rows}</table><p class=muted>The full YAML is best_config.yaml on the MLflow parent run.</p></section>"
        )
    body.append(
        f"<section><h2>Optimisation history</h2>{_img(plots.get('optimization_history.png'), 'optimisation history', 'history')}</section>"
    )
    body.append(
        f"<section><h2>Parameter importance</h2>{_img(plots.get('param_importances.png'), 'parameter importance', 'importance')}"
        f"{_img(plots.get('parallel_coordinates.png'), 'parallel coordinates', 'parallel')}</section>"
    )
    if verdict:
        curves = recall_plot_png(
            {
                f"best (trial {verdict['best_trial']})": verdict["curves"]["best"],
                "baseline": verdict["curves"]["baseline"],
            }
        )
        findings = "".join(
            f'<div class="finding"><b>{_e(f["kind"])}</b>: {_e(f["message"])}</div>'
            for f in verdict["findings"]
        )
        body.append(
            f'<section id="diagnostics"><h2>Recall@k and diagnosis</h2>{_img(curves, "recall@k curves", "recall-curves")}'
            f"{findings}</section>"
        )
        body.append(_flipped(verdict))
    body.append(_trials(study))
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>rag-sweep: {_e(study.study_name)}</title>'
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>"
    )


def write_report(study: optuna.Study, path: Path, plots: dict[str, bytes] | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_whole(path, build_report(study, plots))


def report_study(
    study_name: str,
    *,
    storage: str | None = None,
    tracking_uri: str | None = None,
    out: str | Path | None = None,
    runs_dir: str | Path = "runs",
) -> Path:
    """``sweep report STUDY``: rebuild the HTML report from the storage; attach it to the parent run if found."""
    from sweep.outputs.tracking import Tracker
    from sweep.tuning.storage import embedded_stores, load_existing_study, sqlite_url

    root = Path(runs_dir)
    _, mlflow_db = embedded_stores(study_name, root)
    study = load_existing_study(study_name, storage, root)
    path = write_report(study, Path(out) if out else root / study_name / "report.html")
    tracking_uri = tracking_uri or sqlite_url(mlflow_db)
    if not tracking_uri.startswith("sqlite:///") or Path(tracking_uri.removeprefix("sqlite:///")).exists():
        tracker = Tracker(tracking_uri, study_name)
        parent = tracker.find_parent(study_name)
        if parent is not None:
            tracker.client.log_artifact(parent, str(path))
    return path


__all__ = ["build_report", "report_study", "write_report"]
