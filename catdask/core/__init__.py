"""The solver core, written once against the operator protocols (pymanopt's split)."""
