"""Category-space scatter plots (matplotlib), in the style of the paper's Figures 1-3."""

from __future__ import annotations

import numpy as np

_KINDS = ("auto", "2d", "3d", "simplex", "pairs")
#: File formats a plot is saved in, chosen by the file's extension.
PLOT_FORMATS = ("png", "pdf", "svg")
LEGEND_TITLE = "class"
# Sizes in inches: at the reports' 150 dpi a 3-D plot is about 740 x 710 px once cropped to
# what is drawn (it was 370 x 361), enough for wine's tick labels not to run into each other.
FIGSIZE_3D = (6.8, 5.6)
FIGSIZE_2D = (6.0, 5.2)
PAIR_PANEL_SIZE = (3.4, 3.2)
MAX_TICKS = 5


def plot_format(path):
    """The file format (one of :data:`PLOT_FORMATS`) of a plot written to ``path``, from its
    extension; ``ValueError`` for any other (matplotlib would write PNG bytes under that name)."""
    from pathlib import PurePath

    suffix = PurePath(path).suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        shown = f"extension '.{suffix}'" if suffix else "no extension"
        allowed = ", ".join(f".{f}" for f in PLOT_FORMATS)
        raise ValueError(f"{str(path)!r} has {shown}; a plot is written as {allowed}")
    return suffix


def _class_name_map(classes, class_names):
    """``{class label: display name}`` from a mapping, or from a list aligned with ``classes``."""
    if class_names is None:
        return {}
    if hasattr(class_names, "items"):
        return {c: str(class_names[c]) for c in classes if c in class_names}
    names = [str(n) for n in class_names]
    if len(names) != len(classes):
        raise ValueError(f"class_names has {len(names)} entries for {len(classes)} classes.")
    return dict(zip(classes, names))


def category_axis_labels(classes, class_names=None):
    """``"axis of <name>"`` for each class: axis k of the category space belongs to class k.

    Parameters
    ----------
    classes : sequence
        The estimator's ``classes_``.
    class_names : mapping or sequence, optional
        Display names (label -> name, or one per class in ``classes`` order); a class
        without a name is shown as ``"class <label>"``.

    Returns
    -------
    list of str
    """
    names = _class_name_map(list(classes), class_names)
    return [f"axis of {names.get(c, f'class {c}')}" for c in classes]


def plot_category_space(estimator, X, y=None, ax=None, *, kind="auto", title=None,
                        max_pairs=15, class_names=None):
    """Scatter ``estimator.transform(X)`` with the category axes drawn.

    Parameters
    ----------
    estimator : fitted transformer
        Typically :class:`catdask.CategorySpace` / :class:`catdask.KernelCategorySpace`, or a
        fitted :class:`~sklearn.pipeline.Pipeline` ending in one (e.g.
        ``make_pipeline(StandardScaler(), CategorySpace())``: ``X`` goes through every step);
        its ``classes_`` (if any) name the axes (axis k belongs to ``classes_[k]``).
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,), default=None
        Colours the points by class; None colours them by ``estimator.predict(X)`` when the
        estimator has ``predict``, else draws one colour.
    ax : matplotlib Axes, default=None
        Where to draw (for ``kind="pairs"`` a new figure is always made). None makes a figure.
    kind : {"auto", "2d", "3d", "simplex", "pairs"}, default="auto"
        ``"auto"``: ``"3d"`` for three axes (``"simplex"`` if ``ax`` is a 2-D Axes), ``"2d"``
        for two, ``"pairs"`` for more.
    title : str, default=None
    max_pairs : int, default=15
        At most this many axis pairs in ``"pairs"`` mode.
    class_names : mapping or sequence, default=None
        Display names of the classes: a mapping label -> name, or one name per entry of
        ``estimator.classes_`` (e.g. scikit-learn's ``target_names``). They label the axes
        ("axis of setosa") and the legend (titled "class"); None shows the labels themselves.

    Returns
    -------
    matplotlib Axes, or ndarray of Axes for ``kind="pairs"``
    """
    P = np.asarray(estimator.transform(X))
    if y is None and hasattr(estimator, "predict"):
        y = estimator.predict(X)
    # A pipeline's coordinates are those of its final step (after the preprocessing steps).
    final = estimator[-1] if hasattr(estimator, "steps") else estimator
    classes = getattr(final, "classes_", None)
    # The name first: hasattr(final, "certificate_") would run a pending certificate test.
    is_category = type(final).__name__.endswith("CategorySpace") or hasattr(
        final, "certificate_")
    if is_category and classes is not None:
        labels = category_axis_labels(classes, class_names)
    else:
        labels = [f"component {j + 1}" for j in range(P.shape[1])]
    names = _class_name_map(list(classes), class_names) if classes is not None else None
    return plot_coordinates(P, y, ax=ax, kind=kind, axis_labels=labels,
                            draw_axes=is_category, title=title, max_pairs=max_pairs,
                            class_names=names)


def plot_coordinates(P, y=None, ax=None, *, kind="auto", axis_labels=None, draw_axes=False,
                     title=None, max_pairs=15, point_size=12, class_names=None):
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
    class_names : mapping, default=None
        Display name of each class label in ``y`` for the legend (titled "class"); a label
        without a name is shown as it is.

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
    if y is not None and len(y) != n:
        raise ValueError(f"y has {len(y)} labels for {n} points; give one label per row of X.")
    groups = _groups(y, n, class_names)

    if kind == "pairs":
        every_pair = [(a, b) for a in range(d) for b in range(a + 1, d)]
        pairs = every_pair[:max_pairs]
        cols = min(len(pairs), 4)
        rows = -(-len(pairs) // cols)
        width, height = PAIR_PANEL_SIZE
        fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows),
                                 squeeze=False)
        for axk, (a, b) in zip(axes.flat, pairs):
            _scatter2d(axk, P[:, [a, b]], groups, [labels[a], labels[b]], draw_axes, point_size)
        for axk in list(axes.flat)[len(pairs):]:
            axk.set_visible(False)
        left_out = len(every_pair) - len(pairs)
        if left_out:  # the figure says what it does not show (K = 7: 6 of 21 pairs)
            title = (f"{title}\n" if title else "") + (
                f"first {len(pairs)} of {len(every_pair)} axis pairs shown; {left_out} left "
                f"out (max_pairs={max_pairs})")
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        # One legend for the grid, beside it (bbox_inches="tight" keeps it in the file).
        if groups[0][0] is not None:
            handles, names = axes.flat[0].get_legend_handles_labels()
            fig.legend(handles, names, title=LEGEND_TITLE, loc="upper left",
                       bbox_to_anchor=(1.0, 0.95), fontsize="small", markerscale=1.5)
        return axes

    if kind == "3d":
        if ax is None:
            fig = plt.figure(figsize=FIGSIZE_3D)
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
        _fewer_ticks(ax, ("x", "y", "z"))
        _legend(ax, groups)
    else:
        if ax is None:
            _, ax = plt.subplots(figsize=FIGSIZE_2D)
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
            _legend(ax, groups)
        else:
            Q = P[:, :2] if d >= 2 else np.column_stack([P[:, 0], np.zeros(n)])
            lab = labels[:2] if d >= 2 else [labels[0], ""]
            _scatter2d(ax, Q, groups, lab, draw_axes, point_size)
            _legend(ax, groups)
    if title:
        ax.set_title(title)
    return ax


def _groups(y, n, class_names=None):
    """(legend label, mask, colour) per class, tab10 colours in sorted class order."""
    import matplotlib

    if y is None:
        return [(None, np.ones(n, dtype=bool), "C0")]
    y = np.asarray(y)
    names = class_names or {}
    cmap = matplotlib.colormaps["tab10"]
    return [(str(names.get(c, c)), y == c, cmap(i % 10)) for i, c in enumerate(np.unique(y))]


def _legend(ax, groups):
    """The class legend, titled, unless the points have no classes."""
    if groups[0][0] is not None:
        ax.legend(title=LEGEND_TITLE, fontsize="small", markerscale=1.5)


def _fewer_ticks(ax, which):
    """At most MAX_TICKS ticks per axis: the 3-D default crowds them until they overlap."""
    from matplotlib.ticker import MaxNLocator

    for name in which:
        getattr(ax, f"{name}axis").set_major_locator(MaxNLocator(MAX_TICKS))
    ax.tick_params(labelsize="small")


def _scatter2d(ax, Q, groups, labels, draw_axes, point_size):
    for label, mask, colour in groups:
        ax.scatter(Q[mask, 0], Q[mask, 1], s=point_size, color=colour, label=label)
    if draw_axes:
        ax.axhline(0, color="k", lw=0.8)
        ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    _fewer_ticks(ax, ("x", "y"))
