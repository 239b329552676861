"""A linear accuracy model for planner tests (no dependence on the shipped calibration)."""

from scenario_builder import GONE, small


class LinearAccuracy:
    calibrated = False
    provenance = {"model": "test: loss = slope x PLS"}

    def __init__(self, slope: float = 0.016) -> None:
        self.slope = slope

    def accuracy_loss(self, pls: float, metric: str = "auc", strategy: str = "partial") -> float:
        return self.slope * pls

    def max_pls(self, bound: float, metric: str = "auc", strategy: str = "partial") -> float:
        return bound / self.slope


#: a small DLRM job with job-level interruptions (crash, NaN, outage): every strategy rolls back
#: ``cprsim plan``'s quick form on a small cluster (16 servers, 8 trainers, node MTBF 300 h, a 20 h
#: job): the tests add the bound and the replications they need
QUICK = [
    "plan",
    "--embedding-servers",
    "16",
    "--trainers",
    "8",
    "--node-mtbf-h",
    "300",
    "--save-s",
    "120",
    "--load-s",
    "60",
    "--samples-per-s",
    "1e5",
    "--duration-h",
    "20",
]

JOBBED_SCENARIO = small(
    checkpoint=GONE,
    name="jobbed",
    seed=5,
    replications=60,
    cluster={"embedding_servers": 8, "embedding_gb": 40.0, "dense_gb": 0.4},
    job={"duration_h": 40.0, "samples_per_s": 10000.0},
    reschedule={"mean_s": 120.0},
    failures={
        "embedding": {"family": "exponential", "mtbf_h": 200.0},
        "job": {"family": "exponential", "mtbf_h": 8.0, "restart_s": 300.0},
    },
)
