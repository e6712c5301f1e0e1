"""The solver core, written once against the operator protocols (pymanopt's split).

Problems (``problems``: one alternating Z-step / W-step iteration, on ``manifold`` and
``zstep``), their ``starts``, the batched ``solver`` loop (``acceleration``, ``progress``) and
the fit ``engine`` (precision schedules, choice among restarts, certificates). Everything is
written against the operator interfaces of ``protocols``; nothing here imports the operators,
the estimators, the store, Dask's cluster code or Prefect.
"""
