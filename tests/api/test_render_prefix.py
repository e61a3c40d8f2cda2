"""What a render shares with the session's last one (``service.render_prefix``): pure, no store."""

from __future__ import annotations

from service.render_prefix import PrefixMemo


def turns(*texts: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": t} for t in texts]


def test_leading_turns_shared_with_the_last_render_count_until_the_first_change() -> None:
    memo = PrefixMemo()
    assert memo.shared("s", "openai", {"model": "m", "messages": turns("a", "b")}) == (2, 0)
    assert memo.shared("s", "openai", {"model": "m", "messages": turns("a", "b", "c")}) == (3, 2)
    assert memo.shared("s", "openai", {"model": "m", "messages": turns("a", "x", "c")}) == (3, 1)
    assert memo.shared("s", "anthropic", {"model": "m", "messages": turns("a")}) == (1, 0)


def test_a_changed_system_prompt_or_model_shares_nothing_and_the_memo_is_bounded() -> None:
    memo = PrefixMemo(size=2)
    memo.shared("s", "anthropic", {"system": "one", "messages": turns("a")})
    assert memo.shared("s", "anthropic", {"system": "two", "messages": turns("a")}) == (1, 0)
    assert memo.shared("s", "gemini", {"contents": turns("a")}) == (1, 0)
    memo.shared("t", "gemini", {"contents": turns("a")})  # the oldest ("s", anthropic) goes
    assert memo.shared("s", "anthropic", {"system": "two", "messages": turns("a")}) == (1, 0)
    assert memo.shared("t", "gemini", {"contents": turns("a")}) == (1, 1)
