"""The inspector in a real browser, against a real server.

Each test opens the page on the tour session (tests/ui/scenario.py), clicks
through it as a person would, and checks what is shown against what the
server answers for the same thing: badges and tokens, the rule behind each
change, explain in words, occupancy numbers, rendered requests.
"""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.sync_api import expect

from tests.ui.conftest import Server


def fmt(value: int) -> str:
    return f"{value:,}"


def open_session(page: Any, server: Server, sid: str, fragment: str = "") -> None:
    page.goto(f"{server.base}/ui#session={sid}{fragment}")
    expect(page.locator("#live")).to_have_text("live")
    expect(page.locator(".commit-head")).to_be_visible()


def head_item(server: Server, sid: str, item_id: str) -> dict[str, Any]:
    items = server.get(f"/sessions/{sid}/context")["items"]
    found: dict[str, Any] = next(i for i in items if i["item_id"] == item_id)
    return found


def commit_with(server: Server, sid: str, rule: str) -> dict[str, Any]:
    """The first commit of the session whose transitions include ``rule``."""
    for entry in server.get(f"/sessions/{sid}/timeline")["commits"]:
        rows = server.get(f"/sessions/{sid}/commits/{entry['commit_id']}/transitions")
        if any(r["rule"] == rule for r in rows["transitions"]):
            return {"commit_id": entry["commit_id"], "transitions": rows["transitions"]}
    raise AssertionError(f"no commit with {rule}")


def test_sessions_are_listed_and_searched_by_title(page: Any, server: Server) -> None:
    page.goto(f"{server.base}/ui")
    sessions = page.locator("#session-list li")
    titles = [s["title"] for s in server.get("/sessions")["sessions"]]
    expect(sessions).to_have_count(len(titles))
    page.fill("#search", "SCANNER")
    expect(sessions).to_have_count(1)
    expect(sessions.first).to_contain_text("alternative: a scanner")
    expect(sessions.first).to_contain_text("branch of “inspector tour: fix the parser” at a7")
    sessions.first.locator("a").click()
    expect(page.locator("#title")).to_have_text("alternative: a scanner")
    # The branch point is drawn as a stand-in for the node in its source session.
    stand_in = page.locator(".ext-label")
    expect(stand_in).to_have_text("branched from a7 of “inspector tour: fix the parser” ↗")
    stand_in.click()
    expect(page.locator("#title")).to_have_text("inspector tour: fix the parser")
    page.fill("#search", "no such title")
    expect(sessions).to_have_count(0)


def test_head_commit_items_show_badges_tokens_and_sources(page: Any, server: Server) -> None:
    sid = server.tour.sid
    open_session(page, server, sid)
    head = server.get(f"/sessions/{sid}/context")
    expect(page.locator(f"li[data-commit='{head['id']}']")).to_have_class(re.compile(r"\bon\b"))
    expect(page.get_by_test_id("commit-total")).to_have_text(fmt(head["total_tokens"]))
    rows = page.locator("tr.item-row")
    expect(rows).to_have_count(len(head["items"]))
    for item in head["items"]:
        row = page.locator(f"tr.item-row[data-item='{item['item_id']}']")
        expect(row.get_by_test_id("badge")).to_have_text(item["state"])
        expect(row.get_by_test_id("tokens")).to_have_text(fmt(item["tokens"]))
    assert {i["state"] for i in head["items"]} == {"full", "aged", "summarized", "summary"}
    attached = [i for i in head["items"] if i["attached_from"]]
    assert attached
    for item in attached:
        row = page.locator(f"tr.item-row[data-item='{item['item_id']}']")
        expect(row.get_by_test_id("attached-from")).to_have_text(
            "attached from “notes: duration formats” at n1"
        )
    aged = page.locator("tr.item-row[data-item='t7']")
    expect(aged).to_contain_text("4 assistant turns have passed since this call")
    # An attach marker belongs to the attach node: the item panel shows that node.
    page.locator(f"tr.item-row[data-item='{server.tour.attach}:open']").click()
    expect(page.get_by_test_id("item-title")).to_contain_text("· attach")
    facts = page.get_by_test_id("item").locator(".facts")
    expect(facts.locator("dt", has_text="attaches")).to_have_count(1)
    expect(facts.locator("dd", has_text="n1 of")).to_have_text("n1 of “notes: duration formats”")


def test_a_commit_shows_what_changed_from_its_parent_and_by_which_rule(
    page: Any, server: Server
) -> None:
    sid = server.tour.sid
    open_session(page, server, sid)
    emergency = commit_with(server, sid, "emergency_clearing")
    page.locator(f"li[data-commit='{emergency['commit_id']}']").click()
    page.locator("button[data-tab=changes]").click()
    changes = page.get_by_test_id("changes").locator("li")
    expect(changes).to_have_count(len(emergency["transitions"]))
    for row, t in zip(changes.all(), emergency["transitions"], strict=True):
        expect(row).to_contain_text(t["item_id"])
        expect(row.get_by_test_id("badge")).to_have_text([t["from_state"], t["to_state"]])
        expect(row.get_by_test_id("rule")).to_have_text("Emergency clearing")
        used, line = re.findall(r"\d+", t["inputs"])
        expect(row).to_contain_text(f"The history reached {fmt(int(used))} tokens, past the "
                                    f"emergency line of {fmt(int(line))} tokens.")  # fmt: skip

    summary = commit_with(server, sid, "summarize")
    page.locator(f"li[data-commit='{summary['commit_id']}']").click()
    expect(page.locator(".commit-head")).to_contain_text(f"Commit {summary['commit_id'][:8]}")
    t1 = page.get_by_test_id("changes").locator("li", has_text="t1")
    expect(t1.get_by_test_id("badge")).to_have_text(["cleared", "summarized"])
    expect(t1.get_by_test_id("rule")).to_have_text("Summarize")
    expect(t1).to_contain_text("written by the extractive summarizer")
    expect(page.get_by_test_id("commit")).to_contain_text("New items (1)")  # the summary itself
    page.locator("button[data-tab=items]").click()
    summaries = page.locator("tr.item-row[data-item^='summary:']")
    expect(summaries.get_by_test_id("badge")).to_have_text(["summary"])
    expect(summaries).to_contain_text("summary of 6 items by extractive")


def test_explain_says_every_transition_in_words(page: Any, server: Server) -> None:
    sid = server.tour.sid
    open_session(page, server, sid)
    why = server.get(f"/sessions/{sid}/explain/t1")
    page.locator("tr.item-row[data-item='t1']").click()
    expect(page.get_by_test_id("item-title")).to_contain_text("t1 · tool call read_file")
    steps = page.get_by_test_id("explain").locator("> li")
    expect(steps).to_have_count(3)
    words = ["Tool aging", "Emergency clearing", "Summarize"]
    said = [
        "4 assistant turns have passed since this call; only the last 3 keep their tool "
        "results in full.",
        "past the emergency line",
        "written by the extractive summarizer",
    ]
    for step, t, name, text in zip(steps.all(), why["transitions"], words, said, strict=True):
        expect(step).to_contain_text(name)
        expect(step).to_contain_text(text)
        expect(step).to_contain_text(f"rules {t['rules_version']}")
        expect(step).to_contain_text(f"at event #{t['event_seq']} ({t['event_id']})")
        expect(step).to_contain_text(f"in commit {t['commit_id'][:8]}")
    expect(page.get_by_test_id("item")).to_contain_text("At HEAD: summarized")
    # The commit link in a step selects that commit.
    steps.nth(0).locator("a").click()
    expect(page.locator(".commit-head")).to_contain_text(
        f"Commit {why['transitions'][0]['commit_id'][:8]}"
    )


def test_ring_and_breakdown_show_the_servers_occupancy_live(page: Any, server: Server) -> None:
    sid = server.post("/sessions", {"title": "live one", "context_window": 8000})["session_id"]
    s = f"/sessions/{sid}"
    server.post(f"{s}/nodes", {"role": "system", "input": "Be brief."})
    server.post(f"{s}/nodes", {"role": "user", "input": "Count to three."})
    open_session(page, server, sid)

    def shown_matches_server() -> None:
        occ = server.get(f"{s}/occupancy")
        expect(page.locator("#ring")).to_have_attribute("data-used", str(occ["total_used"]))
        expect(page.locator(".ring-small").first).to_have_text(
            f"{fmt(occ['total_used'])} / {fmt(occ['window'])}"
        )
        for part in ("system", "tools", "history", "output_reserve", "free"):
            expect(page.get_by_test_id(f"part-{part}")).to_have_text(fmt(occ["breakdown"][part]))
        expect(page.get_by_test_id("part-used")).to_have_text(fmt(occ["total_used"]))

    shown_matches_server()
    expect(page.locator("#timeline-count")).to_have_text("2 commits")
    server.post(f"{s}/nodes", {"role": "assistant", "output": "One, two, three."})
    expect(page.locator("#timeline-count")).to_have_text("3 commits")
    shown_matches_server()
    server.post(f"{s}/usage", {"request_id": "req-9", "input_tokens": 950, "cache_read": 50})
    expect(page.get_by_test_id("breakdown")).to_contain_text("Measured by the provider")
    shown_matches_server()
    page.locator("#ring").click()
    expect(page.get_by_test_id("breakdown")).to_be_hidden()
    page.locator("#ring").click()
    expect(page.get_by_test_id("breakdown")).to_be_visible()


def test_rendered_request_in_each_shape_and_copied(page: Any, server: Server) -> None:
    sid = server.tour.sid
    open_session(page, server, sid)
    summary = commit_with(server, sid, "summarize")["commit_id"]
    page.locator(f"li[data-commit='{summary}']").click()
    page.locator("button[data-tab=request]").click()
    for shape in ("neutral", "openai", "anthropic"):
        page.locator(f"button[data-shape={shape}]").click()
        served = server.get(f"/sessions/{sid}/render", shape=shape, commit=summary)
        text = json.dumps(served["request"], indent=2, ensure_ascii=False)
        expect(page.get_by_test_id("request")).to_have_text(text)
    page.get_by_test_id("copy").click()
    expect(page.get_by_test_id("copy")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == text


def test_versions_step_zoom_and_checkout_from_the_history_view(page: Any, server: Server) -> None:
    sid = server.tour.sid
    open_session(page, server, sid)
    page.locator("tr.item-row[data-item='a7']").click()  # brings a7 into the history view
    a7 = page.locator("g[data-node=a7]")
    expect(a7.locator(".versions")).to_have_text("‹1/2›")
    a7.locator("[data-step='1']").click()
    expect(page.locator("g[data-node=a7r]")).to_have_class(re.compile(r"\bselected\b"))
    expect(page.get_by_test_id("version")).to_have_text("version 2 of 2")
    expect(page.get_by_test_id("item")).to_contain_text("(retry)")
    # a7r is on no path of the head commit: faded in the view.
    expect(page.locator("g[data-node=a7r]")).to_have_class(re.compile(r"\bdim\b"))

    view = page.locator("svg.dag-svg > g")

    def scale() -> float:
        found = re.search(r"scale\(([\d.]+)\)", view.get_attribute("transform") or "")
        assert found is not None
        return float(found[1])

    before = scale()
    page.locator("#zoom-in").click()
    assert scale() > before
    page.locator("svg.dag-svg").hover()
    page.mouse.wheel(0, 400)
    expect(view).not_to_have_attribute("transform", re.compile(rf"scale\({before * 1.25}\)"))
    assert scale() < before * 1.25

    page.get_by_test_id("checkout").click()
    expect(page.locator("g[data-node=a7r] .head-tag")).to_have_text("HEAD")
    occ = server.get(f"/sessions/{sid}/occupancy")
    assert occ["head_node_id"] == "a7r"
    expect(page.locator("#ring")).to_have_attribute("data-used", str(occ["total_used"]))
    expect(page.locator(".commit-head")).to_contain_text(f"Commit {occ['commit_id'][:8]}")
    # A checkout from elsewhere reaches the page over the stream.
    server.post(f"/sessions/{sid}/checkout", {"node_id": "a12"})
    expect(page.locator("g[data-node=a12] .head-tag")).to_have_text("HEAD")
    head = server.get(f"/sessions/{sid}/occupancy")
    expect(page.locator(".commit-head")).to_contain_text(f"Commit {head['commit_id'][:8]}")


def test_a_key_in_the_fragment_is_sent_as_a_bearer_token(page: Any, server: Server) -> None:
    sent: list[tuple[str, str | None]] = []
    page.on("request", lambda r: sent.append((r.url, r.headers.get("authorization"))))
    open_session(page, server, server.tour.sid, "&key=s3cret")
    assert "s3cret" not in page.url
    api = [(url, auth) for url, auth in sent if "/sessions" in url]
    assert any(url.endswith("/stream") for url, _ in api)
    assert api and all(auth == "Bearer s3cret" for _, auth in api), api
    expect(page.locator("#key")).to_have_value("s3cret")
    # Forgetting the key: no Authorization header at all from then on.
    page.fill("#key", "")
    page.locator("#key-form button").click()
    sent.clear()
    page.locator("button[data-tab=request]").click()
    expect(page.get_by_test_id("request")).to_contain_text('"messages"')
    assert sent and all(auth is None for _, auth in sent), sent


def test_a_fold_by_the_window_guard_is_said_in_words(page: Any, server: Server) -> None:
    sid = server.post("/sessions", {"title": "a paste past the window", "model": "openai:gpt-4o",
                                    "context_window": 1_000})["session_id"]  # fmt: skip
    for n in range(3):
        server.post(f"/sessions/{sid}/nodes", {"role": "user", "input": f"note {n} " * 60})
    server.post(f"/sessions/{sid}/nodes", {"role": "user", "input": "a long paste " * 200})
    guard = commit_with(server, sid, "window_guard")
    open_session(page, server, sid)
    page.locator(f"li[data-commit='{guard['commit_id']}']").click()
    page.locator("button[data-tab=changes]").click()
    change = page.get_by_test_id("changes").locator("li").first
    expect(change.get_by_test_id("rule")).to_have_text("Window guard")
    expect(change).to_contain_text("over the limit of")
    expect(change).to_contain_text("which needs no LLM")
