"""A fit with Dask input at a script's top level, without the `__main__` guard: the embedded
cluster's workers import the script again (Python's spawn) and reach the fit. Was 500 lines of
tracebacks ending in "RuntimeError: Nanny failed to start." after ~10 s; now one line from
each worker and the driver's error naming the guard."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from catdask.distributed import spawn_guard


def test_a_reimport_of_the_main_script_is_recognised():
    assert not spawn_guard.importing_main_in_a_child()
    namespace = {"__name__": "__mp_main__", "check": spawn_guard.importing_main_in_a_child}
    exec("seen = check()", namespace)  # as the script's top level runs in a spawned worker
    assert namespace["seen"] is True


def test_a_worker_start_failure_in_a_script_names_the_guard(monkeypatch):
    def start():
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(sys.modules["__main__"], "__file__", "/x/script.py", raising=False)
    with pytest.raises(RuntimeError, match=r"^Nanny failed to start. Likely reason: .* put the "
                                           r"code that fits under `if __name__ == \"__main__\":`"):
        spawn_guard.started_with_hint(start)
    with pytest.raises(RuntimeError, match=r"^other$"):  # other errors pass unchanged
        spawn_guard.started_with_hint(lambda: (_ for _ in ()).throw(RuntimeError("other")))


@pytest.mark.slow
def test_an_unguarded_script_fails_fast_with_the_guard_named(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        import dask.array as da
        import numpy as np
        from catdask import CategorySpace
        X = np.random.default_rng(0).normal(size=(40, 3)) + np.repeat(np.eye(3) * 3, [14, 13, 13], axis=0)
        CategorySpace(n_restarts=1).fit(da.from_array(X, chunks=20), np.repeat([0, 1, 2], [14, 13, 13]))
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: Nanny failed to start. Likely reason: ") and \
        '`if __name__ == "__main__":`' in last, r.stderr[-2000:]
    assert "catdask: the local Dask cluster's worker processes start by importing your script" \
        in r.stderr
    assert len(r.stderr.splitlines()) < 150, len(r.stderr.splitlines())  # was 500+
