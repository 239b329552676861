"""The built-in strategies' names, in one place, and the groups of them the code uses.

A model-layer module: it imports nothing, so that any layer may use it (the scenario, the planner,
the calibration, sweeps, the CLI). The strategy classes (``cprsim/sim/``) carry the same names as
their ``name``; tests/test_names.py checks that every constant here is a registered built-in
strategy's name, that every built-in has a constant, and that the planner, the calibration and the
sweep spec spell no strategy name but through this module.

The DLRM emulator's *action kinds* (:data:`SAVE_FULL`, :data:`SAVE_PARTIAL`, :data:`FAIL`) are
here too, apart: two of them are spelt like strategy names but are kinds of save, not strategies
(every emulated strategy but vanilla CPR makes both).
"""

from __future__ import annotations

from typing import Final

# -- the built-in strategies -----------------------------------------------------------------------

#: full recovery: any failure reschedules and every node reloads the last checkpoint (the
#: scenario's default strategy, the planner's baseline)
FULL: Final = "full"
#: CPR-vanilla partial recovery: only the failed nodes are restored; lost updates count as PLS
PARTIAL: Final = "partial"
#: CPR-MFU: partial saves of the top rows by exact access counts, a full save every K
MFU: Final = "mfu"
#: CPR-SSU: as MFU, but the rows ranked by counts from a sub-sample of the inputs
SSU: Final = "ssu"
#: BagPipe-style lookahead: partial saves of the rows the next window will use most
LOOKAHEAD: Final = "lookahead"
#: ECRM: erasure-coded embedding servers, rebuilt from parity while training continues
ECRM: Final = "ecrm"
#: Check-N-Run: differential and quantized checkpoints, full recovery
CHECKNRUN: Final = "checknrun"

#: every built-in strategy, full recovery first (the plugins' strategies are not here)
BUILTIN: Final = (FULL, PARTIAL, MFU, SSU, LOOKAHEAD, ECRM, CHECKNRUN)

# -- the groups the code uses ----------------------------------------------------------------------

#: the built-ins the planner can rank besides full recovery, in the order it lists them (plugins'
#: strategies follow, by name): ``cprsim.planner.ALL_STRATEGIES``
PLAN_ORDER: Final = (PARTIAL, MFU, SSU, LOOKAHEAD, ECRM, CHECKNRUN)
#: the strategies the planner weighs against full recovery unless told otherwise
#: (``make_plan(strategies=...)``, a sweep file's ``[plan] strategies``)
PLAN_DEFAULT: Final = (PARTIAL, MFU, SSU)
#: vanilla CPR, where the code needs one strategy to stand for partial recovery: the accuracy fit
#: (slope, coefficients, measured PLS range) a strategy without its own falls back to, and the
#: plan's headline PLS bound
VANILLA: Final = PARTIAL
#: the strategies the DLRM emulator runs (``cprsim.calibrate.emulation``): what a calibration can
#: measure; the ``standard`` and ``paper`` presets measure them all
EMULATED: Final = (PARTIAL, MFU, SSU, LOOKAHEAD)
#: the strategies a calibration preset measures unless it names its own (the ``quick`` preset)
CALIBRATION_DEFAULT: Final = (PARTIAL, MFU, SSU)

# -- the DLRM emulator's action kinds (NOT strategy names) -----------------------------------------

#: an emulated full save: every row copied (``(SAVE_FULL, -1)``)
SAVE_FULL: Final = "full"
#: an emulated partial save: the top rows by the strategy's ranking (``(SAVE_PARTIAL, -1)``)
SAVE_PARTIAL: Final = "partial"
#: an emulated failure of an embedding shard (``(FAIL, shard)``)
FAIL: Final = "fail"
