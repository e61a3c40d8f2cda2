"""The service layer: wires the write side (``domain``) to the read side (``projections``).

``api/`` and ``scripts/`` call into it; it holds no rules of its own (those are
in ``domain``) and writes no SQL (that is ``projections``).
"""
