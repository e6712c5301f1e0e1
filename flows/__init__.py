"""Deployment entry points for ``deploy/prefect.yaml`` (``flows/train.py:train`` ...).

Thin: each file imports its flows from :mod:`catdask.orchestration`, where they live. This
folder is not installed by ``pip install .``; the library never imports it.
"""
