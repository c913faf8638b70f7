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

import yaml
from mlflow.entities import Metric, Param, RunTag

from sweep.analysis.diagnostics import describe, diagnose
from sweep.errors import SweepError, mask_url
from sweep.locks import create_whole, first_use_lock
from sweep.metrics.runfiles import write_run
from sweep.outputs.plots import recall_plot_png
from sweep.outputs.run_view import applicable, default_artifact_location, flatten, mlflow_name
from sweep.pipeline.result import EvalResult

PARENT_TAG = "sweep.study"


class TrackingUnavailable(SweepError):
    """MLflow did not answer within the retry window; the sweep goes on and logs the run later."""


class RetryingClient:
    """An ``MlflowClient`` whose every call is retried with bounded exponential backoff.

    Once a call has failed for ``retry_seconds`` the client is *offline*: later calls fail at once
    (a sweep must not wait a minute per call while the server is down) until :meth:`probe` finds
    the server answering again.
    """

    def __init__(self, client, retry_seconds: float):
        self._client, self.retry_seconds, self.offline = client, retry_seconds, False

    def probe(self) -> bool:
        """One quick call; True (and online again) when the store answers."""
        try:
            self._client.search_experiments(max_results=1)
        except Exception:  # noqa: BLE001 - any failure means "not yet"
            return False
        self.offline = False
        return True

    def __getattr__(self, name: str):
        method = getattr(self._client, name)

        def call(*args, **kwargs):
            deadline, delay = time.monotonic() + self.retry_seconds, 0.25
            while True:
                try:
                    return method(*args, **kwargs)
                except (TypeError, AttributeError, NameError):
                    raise  # our bug, not the server's
                except Exception as e:  # noqa: BLE001 - connection, HTTP 5xx, a locked SQLite file...
                    if self.offline or time.monotonic() + delay > deadline:
                        self.offline = True
                        reason = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
                        raise TrackingUnavailable(f"MLflow does not answer ({name}: {reason})") from e
                    time.sleep(delay)
                    delay = min(2 * delay, 8.0)

        return call


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
        self._logged: dict[str, set[str]] = {}  # run id -> parameters logged when its trial started

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
        """A RUNNING child run per trial, created when the trial starts so the UI shows work in progress."""
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
        self.log_batches(run.info.run_id, [], [Param(k, str(v)[:6000]) for k, v in params.items()])
        self._logged[run.info.run_id] = set(params)
        return run.info.run_id

    def log_trial(
        self, rid: str, number: int, result: EvalResult | None, value: float, means: dict[str, float]
    ) -> None:
        """Metrics, the full configuration and artifacts. The run stays RUNNING: :meth:`end_trial` closes
        it once Optuna has recorded the trial, so a kill in between never leaves a finished run for a
        trial that is then retried."""
        now = int(time.time() * 1000)
        metrics = [Metric(mlflow_name(k), float(v), now, 0) for k, v in means.items()]
        metrics.append(Metric("objective", float(value), now, 0))
        logged_params: list[Param] = []
        if result is not None:
            config = result.config.model_dump(mode="json", exclude={"source"})
            logged = self._logged.pop(rid, set())
            logged_params = [
                Param(k, str(v)[:6000]) for k, v in applicable(flatten(config)).items() if k not in logged
            ]
            metrics += [
                Metric(f"doc_{mlflow_name(k)}", float(v), now, 0) for k, v in result.doc_scores.mean().items()
            ]
            metrics += [Metric(f"time_{k}_s", float(v), now, 0) for k, v in result.timings.items()]
            if result.encode_texts_per_s is not None:  # what a GPU (or a bigger batch) bought
                metrics.append(Metric("encode_texts_per_s", result.encode_texts_per_s, now, 0))
            if result.dense_truncated_share is not None:
                metrics.append(Metric("dense_truncated_share", result.dense_truncated_share, now, 0))
            # one metric, one step per k: MLflow's chart of it is the recall@k curve
            metrics += [
                Metric("recall_curve", float(v), now, k) for k, v in enumerate(result.recall_curve, 1)
            ]
        tags = (
            [RunTag(f"sweep.cache.{k}", str(v)) for k, v in result.counters.items()]
            if result is not None
            else []
        )
        self.log_batches(rid, metrics, logged_params, tags)  # counters are tags: not results to chart
        if result is not None:
            with tempfile.TemporaryDirectory() as tmp:
                tmp = Path(tmp)
                (tmp / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
                result.scores.write_json(tmp / "scores.json")  # what `sweep compare RUN_ID ...` reads
                write_run(
                    tmp / "run.trec", result.ranking(), tag=f"trial-{number}"
                )  # trec_eval-ready ranking
                (tmp / "diagnosis.txt").write_text(
                    describe(
                        diagnose(result.recall_curve, result.scores.mean(), result.config.retrieval.top_k)
                    )
                    + "\n"
                )
                self.client.log_artifacts(rid, str(tmp))

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
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "recall_at_k.png"
            path.write_bytes(recall_plot_png({label: [m.value for m in history]}))
            self.client.log_artifact(rid, str(path))

    def end_trial(self, rid: str, state: str, reason: str | None = None) -> None:
        """complete → FINISHED; failed → FAILED; pruned and killed → KILLED; the sweep.state tag says which."""
        tags = [RunTag("sweep.state", state)] + ([RunTag("sweep.error", reason[:5000])] if reason else [])
        self.log_batches(rid, [], [], tags)
        self.client.set_terminated(rid, {"complete": "FINISHED", "failed": "FAILED"}.get(state, "KILLED"))

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
        rid = run_id or self.start_trial(parent_id, number, params, objective)
        self.client.set_tag(rid, "sweep.logged_late", "true")
        now = int(time.time() * 1000)
        metrics = [Metric(mlflow_name(k), float(v), now, 0) for k, v in means.items()]
        metrics.append(Metric("objective", float(value), now, 0))
        logged = self._logged.pop(rid, set(params))
        self.log_batches(
            rid,
            metrics,
            [Param(k, str(v)[:6000]) for k, v in applicable(flatten(config)).items() if k not in logged],
        )
        return rid

    def finish_parent(self, parent_id: str, summary: dict[str, float], files: dict[str, bytes | str]) -> None:
        now = int(time.time() * 1000)
        self.log_batches(parent_id, [Metric(k, float(v), now, 0) for k, v in summary.items()])
        with tempfile.TemporaryDirectory() as tmp:
            for name, content in files.items():
                path = Path(tmp) / name
                path.write_bytes(content if isinstance(content, bytes) else content.encode())
            self.client.log_artifacts(parent_id, tmp)
        self.client.set_terminated(parent_id, "FINISHED")
