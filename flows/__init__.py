"""Prefect flows for catdask: ingest, train (certify, register) and evaluate.

Flows only orchestrate; every computation is a ``catdask`` function.
"""
