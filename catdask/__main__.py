"""``python -m catdask ...``: the ``catdask`` command, where the console script is not on PATH."""

from catdask.cli import run

if __name__ == "__main__":
    run()
