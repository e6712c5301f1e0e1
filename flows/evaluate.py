"""``flows/evaluate.py``: the flows of :mod:`catdask.orchestration.evaluate`, run as a script.

The flow lives in :mod:`catdask.orchestration.evaluate`. Run the quick version from a
checkout: ``python flows/evaluate.py``.
"""

from catdask.orchestration.evaluate import evaluate

__all__ = ["evaluate"]

if __name__ == "__main__":
    from catdask.orchestration.input_errors import run_as_script

    run_as_script(evaluate, quick=True)
