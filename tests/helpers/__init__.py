"""Test helpers: data sets (``data``), paths (``paths``), store failures (``store_faults``), and
processes, ports and sockets for the deployment, security and fault tests (``procs``)."""
