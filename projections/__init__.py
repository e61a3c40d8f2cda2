"""Deterministic read models rebuilt from the session event log.

Pure ``(state, event) -> state`` steps live beside thin SQL writers; nothing
here reads the wall clock or calls an LLM.
"""
