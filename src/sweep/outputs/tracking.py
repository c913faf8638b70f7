"""MLflow logging: one parent run per study, one child run per trial.

Parameter names are the flat config paths (``retrieval.fusion.alpha``);
metric names replace ``@`` with ``_at_`` (``ndcg_at_10``), which MLflow
requires. The parent is found again by its ``sweep.study`` tag, so resuming
a study adds children under the same parent instead of a second one.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from mlflow.entities import Metric, Param, RunTag

from sweep.errors import SweepError, mask_url
from sweep.locks import create_whole, first_use_lock
from sweep.outputs.mlflow_client import RetryingClient, TrackingUnavailable
from sweep.outputs.plots import recall_plot_png
from sweep.outputs.run_view import default_artifact_location
from sweep.outputs.trial_log import TrialLog

PARENT_TAG = "sweep.study"


class Tracker:
    """One study's MLflow runs: a parent, and a child per trial.

    Args:
        tracking_uri: an MLflow tracking URI (``sqlite:///...``, ``http://host:5000``, a database URL).
        experiment: the experiment name (the study's name).
        retry_seconds: how long each call is retried before the tracker goes offline.
        option: what set the URI, for the start-up error (``--tracking-uri``, ``search.tracking_uri``).

    Raises:
        SweepError: nothing answers at ``tracking_uri`` at start (one line naming ``option``).

    Example:
        >>> tracker = Tracker("sqlite:///runs/mlflow.db", "hybrid")  # doctest: +SKIP
    """

    def __init__(
        self, tracking_uri: str, experiment: str, retry_seconds: float = 60.0, option: str = "--tracking-uri"
    ):
        import logging

        import mlflow

        logging.getLogger("mlflow.store.db.utils").setLevel(
            logging.WARNING
        )  # "creating tables" on every start
        if tracking_uri.startswith(("http://", "https://")):
            # our own bounded retries replace MLflow's (7 retries with backoff: minutes per call when down)
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
        mlflow.set_tracking_uri(tracking_uri)
        create_whole(tracking_uri, lambda tmp: mlflow.MlflowClient(tmp).search_experiments(max_results=1))
        try:
            with first_use_lock(tracking_uri):  # MLflow creates (migrates) a new store's tables on first use
                self.client = RetryingClient(mlflow.MlflowClient(tracking_uri), min(retry_seconds, 5.0))
                exp = self.client.get_experiment_by_name(experiment)
                self.experiment_id = (
                    exp.experiment_id
                    if exp
                    else self.client.create_experiment(
                        experiment, artifact_location=default_artifact_location(tracking_uri)
                    )
                )
        except TrackingUnavailable as e:
            raise SweepError(
                f"{option} {mask_url(tracking_uri)}: {str(e).removeprefix('MLflow ')}; start the "
                f"tracking server, fix the URI, or leave {option} out to use the embedded store "
                "runs/mlflow.db"
            ) from None
        self.client.retry_seconds = retry_seconds
        self.tracking_uri = tracking_uri
        self.runs: dict[int, str] = {}  # trial number -> its open run, between start_trial and close_trial

    @property
    def offline(self) -> bool:
        return self.client.offline

    def share_view(self, state: dict) -> str:
        """Save a runs-table view (columns, filter, order) as MLflow's UI shares one: an experiment tag
        ``mlflow.sharedViewState.<key>`` that the URL's ``viewStateShareKey`` names. Returns the key."""
        import hashlib
        import json

        value = json.dumps(state, separators=(",", ":"), sort_keys=True)
        key = "rag-sweep-" + hashlib.sha1(value.encode()).hexdigest()[:12]
        self.client.set_experiment_tag(self.experiment_id, f"mlflow.sharedViewState.{key}", value)
        return key

    def find_parent(self, study: str) -> str | None:
        """The study's parent run; with several (two workers racing at the start), the oldest."""
        found = self.client.search_runs(
            [self.experiment_id],
            f"tags.`{PARENT_TAG}` = '{study}'",
            order_by=["attributes.start_time ASC"],
            max_results=10,
        )
        return found[0].info.run_id if found else None

    def parent(self, study: str, tags: dict[str, str]) -> str:
        run_id = self.find_parent(study)
        if run_id is None:
            mine = self.client.create_run(
                self.experiment_id, tags={PARENT_TAG: study, "mlflow.runName": study, **tags}
            )
            run_id = self.find_parent(study)
            if run_id != mine.info.run_id:  # another worker created one first: use that one
                self.client.delete_run(mine.info.run_id)
        if self.client.get_run(run_id).info.status != "RUNNING":
            self.client.update_run(run_id, "RUNNING")
        return run_id

    def start_trial(
        self, parent_id: str, number: int, params: dict, objective: str, tags: dict[str, str] | None = None
    ) -> str:
        """A RUNNING child run per trial, created when the trial starts so the UI shows work in progress
        (its name holds the searched values; parameters come with the metrics, in one batch). Later calls
        name the trial by its number."""
        short = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in params.items())[:200]
        run = self.client.create_run(
            self.experiment_id,
            tags={
                "mlflow.parentRunId": parent_id,
                "mlflow.runName": f"trial {number:03d}" + (f": {short}" if short else ""),
                "sweep.trial": str(number),
                "sweep.objective": objective,
                "sweep.state": "running",
                **(tags or {}),
            },
        )
        self.runs[number] = run.info.run_id
        return run.info.run_id

    def log_trial(self, log: TrialLog) -> None:
        """Metrics, the full configuration and artifacts of the trial :meth:`start_trial` opened (nothing
        when it has no run). The run stays RUNNING: :meth:`close_trial` closes it once Optuna has
        recorded the trial, so a kill in between never leaves a finished run for a trial then retried."""
        rid = self.runs.get(log.number)
        if rid is None:
            return
        metrics = log.metrics(now=int(time.time() * 1000))
        self.log_batches(rid, metrics, log.params(set()), log.tags())
        if log.files:
            self.log_files(rid, log.files)

    def close_trial(self, number: int, state: str, reason: str | None = None) -> None:
        """:meth:`end_trial` for the run of trial ``number`` (nothing when it has none)."""
        if (rid := self.runs.pop(number, None)) is not None:
            self.end_trial(rid, state, reason)

    def log_batches(self, rid: str, metrics: list[Metric], params: list[Param] = (), tags: list = ()) -> None:
        """As few ``log_batch`` calls as MLflow's limits allow (each call is a round trip and a commit):
        per call at most 1,000 metrics, 100 parameters, 100 tags, and 1,000 entries in all."""
        metrics, params, tags = list(metrics), list(params), list(tags)
        while metrics or params or tags:
            p, t = params[:100], tags[:100]
            m = metrics[: 1000 - len(p) - len(t)]
            self.client.log_batch(rid, metrics=m, params=p, tags=t)
            metrics, params, tags = metrics[len(m) :], params[len(p) :], tags[len(t) :]

    def log_recall_plot(self, rid: str, label: str) -> None:
        """``recall_at_k.png`` of one trial's run, drawn from the ``recall_curve`` metric it logged.

        Drawn only for the runs a person opens (the best trial and the baseline, at the end of a sweep):
        a figure per trial cost more than the trial's evaluation.
        """
        history = sorted(self.client.get_metric_history(rid, "recall_curve"), key=lambda m: m.step)
        if not history:
            return
        self.log_files(rid, {"recall_at_k.png": recall_plot_png({label: [m.value for m in history]})})

    def end_trial(self, rid: str, state: str, reason: str | None = None) -> None:
        """complete → FINISHED; failed → FAILED; pruned and killed → KILLED; the sweep.state tag says which."""
        if reason:
            self.log_batches(
                rid, [], [], [RunTag("sweep.state", state), RunTag("sweep.error", reason[:5000])]
            )
        else:
            self.client.set_tag(rid, "sweep.state", state)  # one write; a batch opens three sessions
        self.client.set_terminated(rid, {"complete": "FINISHED", "failed": "FAILED"}.get(state, "KILLED"))

    def trial_run(self, parent_id: str, number: int) -> str | None:
        """The run of trial ``number`` under the parent (after reconcile, there is at most one)."""
        found = self.client.search_runs(
            [self.experiment_id],
            f"tags.`mlflow.parentRunId` = '{parent_id}' and tags.`sweep.trial` = '{number}'",
            max_results=1,
        )
        return found[0].info.run_id if found else None

    def children(self, parent_id: str) -> list:
        """Every (not deleted) child run of the parent, whatever its status."""
        found, token = [], None
        while True:
            page = self.client.search_runs(
                [self.experiment_id],
                f"tags.`mlflow.parentRunId` = '{parent_id}'",
                max_results=1000,
                page_token=token,
            )
            found += list(page)
            token = page.token
            if not token:
                return found

    def log_late(
        self,
        parent_id: str,
        number: int,
        params: dict,
        config: dict,
        value: float,
        means: dict[str, float],
        objective: str,
        run_id: str | None = None,
    ) -> str:
        """The run of a trial Optuna completed while MLflow was away (or its worker was killed before
        logging): parameters, configuration and means from the study; tagged ``sweep.logged_late``."""
        logged = set(self.client.get_run(run_id).data.params) if run_id else set()
        rid = run_id or self.start_trial(parent_id, number, params, objective)
        self.runs.pop(number, None)
        self.client.set_tag(rid, "sweep.logged_late", "true")
        log = TrialLog(number, float(value), dict(means), config)
        self.log_batches(rid, log.metrics(now=int(time.time() * 1000)), log.params(logged))
        return rid

    def finish_parent(self, parent_id: str, summary: dict[str, float], files: dict[str, bytes | str]) -> None:
        now = int(time.time() * 1000)
        self.log_batches(parent_id, [Metric(k, float(v), now, 0) for k, v in summary.items()])
        self.log_files(parent_id, files)
        self.client.set_terminated(parent_id, "FINISHED")

    def log_files(self, rid: str, files: dict[str, bytes | str]) -> None:
        """Artifacts of a run from memory: name -> content, through one temporary folder."""
        with tempfile.TemporaryDirectory() as tmp:
            for name, content in files.items():
                (Path(tmp) / name).write_bytes(content if isinstance(content, bytes) else content.encode())
            self.client.log_artifacts(rid, tmp)
