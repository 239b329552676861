"""Calibrate accuracy loss against PLS on a real PyTorch DLRM (issue 5).

Torch-free at this level: ``load_calibration`` and ``Calibration`` are what the planner uses.
The DLRM (``model``), the emulated embedding servers (``emulation``) and the experiment
(``runner``, ``costs``) import torch and need the ``dlrm`` extra; ``data`` is numpy only.
"""

from cprsim.calibrate.calibration import Calibration, load_calibration

__all__ = ["Calibration", "load_calibration"]
