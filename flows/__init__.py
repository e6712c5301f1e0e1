"""Shortcuts for a checkout: ``python flows/train.py iris``, ``from flows.train import train``.

Thin: each file imports its flows from :mod:`catdask.orchestration`, where they live.
``deploy/prefect.yaml`` names those modules (``catdask.orchestration.train.train``), not these
files, so a Prefect worker needs only the installed package. This folder is not installed by
``pip install .``; the library never imports it.
"""
