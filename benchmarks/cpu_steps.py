"""A benchmark helper: CPU seconds per step, by wrapping the step's function where it is looked up.

    acc = {}
    time_steps(acc, {"LM fit": ("pipeline.stages.quality.lm", "fit_texts")})

Each named function (a module global, looked up at call time by its callers) is replaced by a
wrapper that adds its time.process_time() to acc[step]; a step the tree does not have (an older
source tree) is left out. Nested steps count in both.
"""

from __future__ import annotations

import importlib
import time


def time_steps(acc: dict[str, float], steps: dict[str, tuple[str, str]]) -> None:
    for step, (mod_name, fn_name) in steps.items():
        mod = importlib.import_module(mod_name)
        fn = getattr(mod, fn_name, None)
        if fn is None:
            continue

        def timed(*a, _fn=fn, _step=step, **k):
            t = time.process_time()
            try:
                return _fn(*a, **k)
            finally:
                acc[_step] = acc.get(_step, 0.0) + time.process_time() - t

        setattr(mod, fn_name, timed)
