"""The context rules: pure functions over a working context and a policy.

Each rule reads only its inputs (items, the policy, the triggering event's
timestamp) and changes items only through ``WorkingContext.set_state``,
which enforces tighten-only transitions and writes the audit trail.
"""
