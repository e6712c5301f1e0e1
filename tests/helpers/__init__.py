"""Helpers for the deployment, security and fault tests (processes, ports, sockets)."""
