"""A linear accuracy model for planner tests (no dependence on the shipped calibration)."""


class LinearAccuracy:
    calibrated = False
    provenance = {"model": "test: loss = slope x PLS"}

    def __init__(self, slope: float = 0.016) -> None:
        self.slope = slope

    def accuracy_loss(self, pls: float, metric: str = "auc", strategy: str = "partial") -> float:
        return self.slope * pls

    def max_pls(self, bound: float, metric: str = "auc", strategy: str = "partial") -> float:
        return bound / self.slope
