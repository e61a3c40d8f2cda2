"""Pure domain: the Session aggregate, its events, and the context rules.

Nothing here knows about HTTP or SQL; persistence is chosen by the
eventsourcing environment, and rules are pure functions over items.
"""
