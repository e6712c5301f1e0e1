"""Category-space scatter plots (matplotlib), in the style of the paper's Figures 1-3.

:func:`plot_category_space` takes a fitted :class:`~catdask.CategorySpace` or
:class:`~catdask.KernelCategorySpace` (or any fitted transformer) and draws the coordinates of
``X`` with the category axes marked: a 3-D scatter for three classes (or, on a 2-D ``ax``, the
projection along (1, 1, 1) in which the three axes are 120 degrees apart), a plain scatter for
two, and a grid of axis pairs for more. :func:`plot_coordinates` does the same for an array.
matplotlib is imported only when a function is called.
"""

from __future__ import annotations

import numpy as np

__all__ = ["plot_category_space", "plot_coordinates"]

_KINDS = ("auto", "2d", "3d", "simplex", "pairs")


def plot_category_space(estimator, X, y=None, ax=None, *, kind="auto", title=None,
                        max_pairs=15):
    """Scatter ``estimator.transform(X)`` with the category axes drawn.

    Parameters
    ----------
    estimator : fitted transformer
        Typically :class:`catdask.CategorySpace` / :class:`catdask.KernelCategorySpace`; its
        ``classes_`` (if any) name the axes (axis k belongs to ``classes_[k]``).
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,), default=None
        Colours the points by class; None colours by the angle classifier's prediction when
        the estimator has ``predict``, else draws one colour.
    ax : matplotlib Axes, default=None
        Where to draw (for ``kind="pairs"`` a new figure is always made). None makes a figure.
    kind : {"auto", "2d", "3d", "simplex", "pairs"}, default="auto"
        ``"auto"``: ``"3d"`` for three axes (``"simplex"`` if ``ax`` is a 2-D Axes), ``"2d"``
        for two, ``"pairs"`` for more.
    title : str, default=None
    max_pairs : int, default=15
        At most this many axis pairs in ``"pairs"`` mode.

    Returns
    -------
    matplotlib Axes, or ndarray of Axes for ``kind="pairs"``
    """
    P = np.asarray(estimator.transform(X))
    if y is None and hasattr(estimator, "predict"):
        y = estimator.predict(X)
    classes = getattr(estimator, "classes_", None)
    is_category = hasattr(estimator, "certificate_") or type(estimator).__name__.endswith(
        "CategorySpace"
    )
    if is_category and classes is not None:
        labels = [f"axis {c}" for c in classes]
    else:
        labels = [f"component {j + 1}" for j in range(P.shape[1])]
    return plot_coordinates(P, y, ax=ax, kind=kind, axis_labels=labels,
                            draw_axes=is_category, title=title, max_pairs=max_pairs)


def plot_coordinates(P, y=None, ax=None, *, kind="auto", axis_labels=None, draw_axes=False,
                     title=None, max_pairs=15, point_size=12):
    """Scatter reduced coordinates ``P`` (n_samples, d) coloured by ``y``.

    Parameters
    ----------
    P : array-like of shape (n_samples, n_dims)
    y : array-like of shape (n_samples,), default=None
    ax : matplotlib Axes, default=None
    kind : {"auto", "2d", "3d", "simplex", "pairs"}, default="auto"
        See :func:`plot_category_space`. ``"simplex"`` needs exactly three dimensions.
    axis_labels : list of str, default=None
    draw_axes : bool, default=False
        Draw the coordinate axes as labelled rays from the origin (category axes).
    title : str, default=None
    max_pairs : int, default=15
    point_size : float, default=12

    Returns
    -------
    matplotlib Axes, or ndarray of Axes for ``kind="pairs"``
    """
    import matplotlib.pyplot as plt

    P = np.asarray(P, dtype=float)
    if P.ndim == 1:
        P = P[:, None]
    n, d = P.shape
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}; got {kind!r}.")
    labels = list(axis_labels) if axis_labels is not None else [f"dim {j + 1}" for j in range(d)]
    if len(labels) != d:
        raise ValueError(f"axis_labels has {len(labels)} entries for {d} dimensions.")
    if kind == "auto":
        if d == 3:
            kind = "simplex" if ax is not None and getattr(ax, "name", "") != "3d" else "3d"
        elif d <= 2:
            kind = "2d"
        else:
            kind = "pairs"
    if kind in ("3d", "simplex") and d != 3:
        raise ValueError(f"kind={kind!r} needs 3 dimensions; got {d}.")
    groups = _groups(y, n)

    if kind == "pairs":
        pairs = [(a, b) for a in range(d) for b in range(a + 1, d)][:max_pairs]
        cols = min(len(pairs), 4)
        rows = -(-len(pairs) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
        for axk, (a, b) in zip(axes.flat, pairs):
            _scatter2d(axk, P[:, [a, b]], groups, [labels[a], labels[b]], draw_axes, point_size)
        for axk in list(axes.flat)[len(pairs):]:
            axk.set_visible(False)
        axes.flat[0].legend(fontsize="small", markerscale=1.5)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        return axes

    if kind == "3d":
        if ax is None:
            fig = plt.figure(figsize=(5, 4.5))
            ax = fig.add_subplot(projection="3d")
        elif getattr(ax, "name", "") != "3d":
            raise ValueError("kind='3d' needs a 3-D Axes (projection='3d'); use kind='simplex'.")
        for label, mask, colour in groups:
            ax.scatter(P[mask, 0], P[mask, 1], P[mask, 2], s=point_size, color=colour, label=label)
        if draw_axes:
            reach = np.abs(P).max() * 1.05 if n else 1.0
            for j in range(3):
                e = np.zeros(3)
                e[j] = reach
                ax.plot([0, e[0]], [0, e[1]], [0, e[2]], color="k", lw=1.2)
                ax.text(*(1.05 * e), labels[j], fontsize="small")
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        ax.set_zlabel(labels[2])
        ax.legend(fontsize="small", markerscale=1.5)
    else:
        if ax is None:
            _, ax = plt.subplots(figsize=(4.5, 4.2))
        if kind == "simplex":
            # Orthographic view along (1, 1, 1): the three axes project to rays 120 deg apart.
            basis = np.array([[1.0, -1.0, 0.0], [1.0, 1.0, -2.0]])
            basis /= np.linalg.norm(basis, axis=1, keepdims=True)
            Q = P @ basis.T
            for label, mask, colour in groups:
                ax.scatter(Q[mask, 0], Q[mask, 1], s=point_size, color=colour, label=label)
            if draw_axes:
                reach = np.abs(Q).max() * 1.05 if n else 1.0
                for j in range(3):
                    ray = basis[:, j] / np.linalg.norm(basis[:, j]) * reach
                    ax.plot([0, ray[0]], [0, ray[1]], color="k", lw=1.2)
                    ax.annotate(labels[j], ray * 1.04, fontsize="small", ha="center")
            ax.set_aspect("equal", adjustable="datalim")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.legend(fontsize="small", markerscale=1.5)
        else:
            Q = P[:, :2] if d >= 2 else np.column_stack([P[:, 0], np.zeros(n)])
            lab = labels[:2] if d >= 2 else [labels[0], ""]
            _scatter2d(ax, Q, groups, lab, draw_axes, point_size)
            ax.legend(fontsize="small", markerscale=1.5)
    if title:
        ax.set_title(title)
    return ax


def _groups(y, n):
    """(label, mask, colour) per class, tab10 colours in sorted class order."""
    import matplotlib

    if y is None:
        return [(None, np.ones(n, dtype=bool), "C0")]
    y = np.asarray(y)
    cmap = matplotlib.colormaps["tab10"]
    return [(str(c), y == c, cmap(i % 10)) for i, c in enumerate(np.unique(y))]


def _scatter2d(ax, Q, groups, labels, draw_axes, point_size):
    for label, mask, colour in groups:
        ax.scatter(Q[mask, 0], Q[mask, 1], s=point_size, color=colour, label=label)
    if draw_axes:
        ax.axhline(0, color="k", lw=0.8)
        ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
