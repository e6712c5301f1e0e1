"""The paper's published accuracies (Tables 1-3 of Smith & Rangarajan), as data."""

from __future__ import annotations

from dataclasses import dataclass

#: Row names as printed in the paper -> our data-set keys (see catdask.evaluation.data).
DATASET_NAMES = {
    "Vehicle": "vehicle",
    "Wine": "wine",
    "Iris": "iris",
    "Seeds": "seeds",
    "thyroid": "thyroid",
    "Satellite": "satellite",
    "Segmentation": "segmentation",
    "Vertebral": "vertebral",
}


@dataclass(frozen=True)
class PaperTable:
    """One published table."""

    key: str  # "table1", "table2" or "table3"
    label: str  # the LaTeX label
    caption: str  # as printed
    columns: tuple  # method columns in printed order
    n_classes: dict  # data-set key -> number of classes as printed in the row name
    values: dict  # data-set key -> column -> accuracy (%)

    def value(self, dataset, column):
        """Published accuracy (%) or None when the table has no such cell."""
        return self.values.get(dataset, {}).get(column)


_K = {"vehicle": 4, "wine": 3, "iris": 3, "seeds": 3, "thyroid": 3, "satellite": 6,
      "segmentation": 7, "vertebral": 3}


def _table(key, label, caption, columns, rows):
    values = {DATASET_NAMES[name]: dict(zip(columns, nums, strict=True)) for name, nums in rows}
    return PaperTable(key, label, caption, tuple(columns), dict(_K), values)


TABLE1 = _table(
    "table1",
    "tab:List-of-test-results",
    "Linear dimensionality reduction w/ SVM classification..",
    ("CQS", "CAS", "LS-LDA", "PCA", "MC-FLD"),
    [
        ("Vehicle", (53.91, 53.05, 76.56, 55.36, 76.82)),
        ("Wine", (96.07, 96.82, 95.51, 77.19, 97.28)),
        ("Iris", (97.55, 96.88, 96.11, 96.77, 96.77)),
        ("Seeds", (90.39, 90.79, 95.15, 92.53, 95.79)),
        ("thyroid", (94.02, 94.08, 94.02, 92.57, 93.92)),
        ("Satellite", (85.30, 85.20, 86.38, 85.45, 86.52)),
        ("Segmentation", (93.14, 93.44, 94.62, 94.40, 94.43)),
        ("Vertebral", (84.13, 82.79, 81.45, 80.05, 81.18)),
    ],
)

TABLE2 = _table(
    "table2",
    "tab:List-of-test-results-kernel-norm",
    "Kernel dimensionality reduction w/ SVM classification.",
    ("K-CQS", "K-CAS", "K-PCA", "K-MC-FLD"),
    [
        ("Vehicle", (40.27, 40.92, 44.81, 74.35)),
        ("Wine", (92.95, 95.63, 95.95, 96.88)),
        ("Iris", (95.55, 93.33, 95.55, 94.44)),
        ("Seeds", (90.21, 90.47, 91.53, 93.65)),
        ("thyroid", (41.97, 40.24, 43.08, 72.34)),
        ("Satellite", (81.54, 86.23, 89.69, 90.61)),
        ("Segmentation", (72.96, 77.24, 83.01, 92.43)),
        ("Vertebral", (70.96, 69.53, 70.96, 82.25)),
    ],
)

TABLE3 = _table(
    "table3",
    "tab:List-of-test-results-kernel-zscore-angle",
    "Kernel dimensionality reduction w/ angle classification.",
    ("K-CQS-A", "K-CAS-A"),
    [
        ("Vehicle", (67.96, 68.24)),
        ("Wine", (95.32, 95.32)),
        ("Iris", (95.55, 95.18)),
        ("Seeds", (91.79, 91.79)),
        ("thyroid", (67.90, 66.79)),
        ("Satellite", (83.33, 76.29)),
        ("Segmentation", (50.21, 48.94)),
        ("Vertebral", (77.59, 77.77)),
    ],
)

PAPER_TABLES = {t.key: t for t in (TABLE1, TABLE2, TABLE3)}
