"""The solver core, written once against the operator protocols (pymanopt's split).

- ``manifold``: the Stiefel manifold St(D, K): the polar step, distances (paper eq. (19)).
- ``zstep``: the Z-step, optimal auxiliary variables for fixed axes.
- ``problems``: one alternating iteration (Z-step, then W-step) per problem, on an operator.
- ``protocols``: the two operator interfaces (data, Gram) everything here is written against;
  the operators (:mod:`catdask.operators`) implement them, the core imports no operator.
- ``starts``: starting points of the restarts; ``class_eigen``: the lockstep Lanczos of the
  decoupled kernel start.
- ``acceleration``: safeguarded Anderson mixing of the alternating iteration.
- ``solver``: the loop over all restarts as one batch; ``progress``: its listener.
- ``engine``: one fit: the starts, the solver runs under a precision schedule (``precision``),
  the choice among restarts and their certificates, returned as a frozen ``FitResult``.
- ``classes``: per-class bookkeeping (which samples belong to which axis);
  ``validation``: input checks shared by the estimators.

Nothing here imports the operators, the estimators, the store, Dask's cluster code or Prefect.
"""
