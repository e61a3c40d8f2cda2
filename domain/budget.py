"""The four-way token budget: system / history / tools / output reserve.

The window comes from the model catalogue (or the session's override); the
output reserve is set aside first, system prompt and tool definitions are
what they measure, and history gets the rest.  Compaction triggers when
history passes ``compact_at`` of its share, the emergency path at
``emergency_at``.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.policy import Policy


@dataclass(frozen=True)
class Budget:
    window: int
    system: int
    tools: int
    output_reserve: int
    history: int
    compact_at: int
    emergency_at: int

    @classmethod
    def split(cls, window: int, system_tokens: int, tool_tokens: int, policy: Policy) -> Budget:
        reserve = min(policy.output_reserve_max, int(window * policy.output_reserve_fraction))
        history = max(0, window - reserve - system_tokens - tool_tokens)
        return cls(
            window=window,
            system=system_tokens,
            tools=tool_tokens,
            output_reserve=reserve,
            history=history,
            compact_at=int(history * policy.compact_at),
            emergency_at=int(history * policy.emergency_at),
        )

    def status(self, history_used: int) -> str:
        if history_used > self.emergency_at:
            return "emergency"
        if history_used > self.compact_at:
            return "compact"
        return "ok"
