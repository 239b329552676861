"""The planner's quick form: a scenario from the handful of numbers an operator knows, and the
strategies to rank, as ``cprsim plan`` takes them without a scenario file.

    from cprsim.planner import make_plan
    from cprsim.planner.quick import quick_scenario, plan_strategies

    s = quick_scenario(embedding_servers=16, node_mtbf_h=2000, save_s=120, load_s=60, trainers=8)
    p = make_plan(s, 0.001, strategies=plan_strategies("partial,mfu"))

Units: times of the checkpoint costs and of rescheduling in seconds (``*_s``), MTBFs and the
job's failure-free duration in hours (``*_h``), throughput in samples per second.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cprsim.errors import InputError, ParameterError

if TYPE_CHECKING:  # pragma: no cover - imported where used (pydantic is slow to import)
    from cprsim.scenario import Scenario

#: the quick form's parameters that have no default: a scenario cannot be built without them
REQUIRED = ("embedding_servers", "node_mtbf_h", "save_s", "load_s")


class MissingParameters(InputError):
    """Parameters without a default were not given (``names``: their Python names, in the order of
    :data:`REQUIRED`)."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = tuple(names)
        super().__init__(f"missing {', '.join(self.names)}")


class UnknownStrategies(ParameterError):
    """Strategy names the planner does not know (``unknown``), and those it does (``known``); the
    parameter is ``strategies``."""

    def __init__(self, unknown: Iterable[str], known: Iterable[str]) -> None:
        self.unknown, self.known = tuple(unknown), tuple(known)
        super().__init__(
            "strategies",
            f"unknown {', '.join(self.unknown)} (choose from {', '.join(self.known)}, or all)",
        )


def quick_scenario(
    *,
    embedding_servers: int,
    node_mtbf_h: float,
    save_s: float,
    load_s: float,
    trainers: int = 1,
    reschedule_s: float = 300.0,
    shard_load_s: float | None = None,
    duration_h: float = 50.0,
    samples_per_s: float | None = None,
    job_mtbf_h: float | None = None,
    replications: int = 100,
    seed: int = 1,
) -> Scenario:
    """A scenario named ``quick`` from an operator's numbers, every node failing on its own
    (exponential lifetimes): the scenario ``cprsim plan`` builds from its quick options.

    ``embedding_servers``, ``trainers``: node counts; ``node_mtbf_h``: the mean time between
    failures of one node (hours, trainers and embedding servers alike); ``save_s``: a blocking
    checkpoint save (seconds); ``load_s``: a full checkpoint load (seconds); ``shard_load_s``: one
    embedding shard's load (seconds; default ``load_s / embedding_servers``, at least 1 ms);
    ``reschedule_s``: rescheduling a failed node (seconds, constant); ``duration_h``: the
    failure-free training time W (hours); ``samples_per_s``: the job's throughput (MFU and SSU need
    it); ``job_mtbf_h``: mean time between job-level interruptions (crash, NaN, outage,
    preemption; hours; default none); ``replications``, ``seed``: the scenario's. The checkpoint
    interval starts at min(1 h, ``duration_h``) (the planner searches it).

    A required parameter given as None raises :class:`MissingParameters` naming them all; a value
    the scenario model refuses raises InputError naming the scenario key.
    """
    values: dict[str, object] = {
        "embedding_servers": embedding_servers,
        "node_mtbf_h": node_mtbf_h,
        "save_s": save_s,
        "load_s": load_s,
    }
    missing = [name for name in REQUIRED if values[name] is None]
    if missing:
        raise MissingParameters(missing)
    from cprsim import scenario as sc

    raw: dict[str, Any] = {
        "name": "quick-form",
        "description": "built from cprsim plan's quick options",
        "seed": seed,
        "replications": replications,
        "cluster": {"trainers": trainers, "embedding_servers": embedding_servers},
        "job": {"duration_h": duration_h},
        "reschedule": {"family": "constant", "mean_s": reschedule_s},
        "failures": {
            "trainer": {"family": "exponential", "mtbf_h": node_mtbf_h},
            "embedding": {"family": "exponential", "mtbf_h": node_mtbf_h},
        },
        "costs": {
            "save_s": save_s,
            "load_s": load_s,
            "shard_load_s": shard_load_s
            if shard_load_s is not None
            else max(load_s / embedding_servers, 1e-3),
        },
        "checkpoint": {"interval_h": min(1.0, duration_h)},
    }
    if samples_per_s is not None:
        raw["job"]["samples_per_s"] = samples_per_s
    if job_mtbf_h is not None:
        raw["failures"]["job"] = {"family": "exponential", "mtbf_h": job_mtbf_h}
    return sc.validate(raw, "cprsim plan (quick options)")


def plan_strategies(spec: str | Iterable[str]) -> list[str]:
    """The strategies to rank besides full recovery: ``"all"`` (every one the registry knows,
    installed plugins included), a comma-separated list (``"partial, mfu"``) or a list of names;
    blanks are skipped. An unknown name raises :class:`UnknownStrategies`."""
    from cprsim.planner import ALL_STRATEGIES  # the registry's, plugins included (loads them)

    if isinstance(spec, str):
        if spec.strip() == "all":
            return list(ALL_STRATEGIES)
        names = [x.strip() for x in spec.split(",") if x.strip()]
    else:
        names = [str(x).strip() for x in spec if str(x).strip()]
    unknown = [x for x in names if x not in ALL_STRATEGIES]
    if unknown:
        raise UnknownStrategies(unknown, ALL_STRATEGIES)
    return names
