"""``flows/train.py``: the flows of :mod:`catdask.orchestration.train`, run as a script.

The flows live in :mod:`catdask.orchestration.train`. Run one from a checkout:
``python flows/train.py iris``.
"""

import sys

from catdask.orchestration.train import retrain_registered, run_train, train

__all__ = ["train", "retrain_registered"]

if __name__ == "__main__":
    from catdask.orchestration.input_errors import run_as_script

    run_as_script(run_train, dataset=sys.argv[1] if len(sys.argv) > 1 else "iris")
