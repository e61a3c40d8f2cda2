"""LoCoMo conversations as the retention benchmark reads them: turns, questions, matching.

A conversation file (``../shared/locomo/``, see its README) holds sessions of
turns and questions with their answer, evidence turns and category.  Here a
turn is one message (a session's first carries its date, a shared photo its
caption) and a question keeps its own text (the recall query), its answer
normalized and its evidence ids; category 5 (adversarial: no answer in the
conversation) is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scripts.planted_facts import normalize


def matches(answer: str, text: str, tokens: set[str]) -> bool:
    """``text`` normalized, ``tokens`` its token set; ``answer`` already normalized."""
    if not answer:
        return False
    return answer in text or all(t in tokens for t in answer.split())


@dataclass
class Turn:
    dia_id: str
    role: str
    text: str


def turns_of(conv: dict[str, Any]) -> list[Turn]:
    """Every turn in order; a session's first turn carries its date, a photo its caption."""
    out: list[Turn] = []
    a = conv["speaker_a"]
    n = 1
    while f"session_{n}" in conv:
        when = conv.get(f"session_{n}_date_time", "")
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            if i == 0 and when:
                text = f"({when}) {text}"
            role = "user" if turn["speaker"] == a else "assistant"
            out.append(Turn(turn["dia_id"], role, text))
        n += 1
    return out


@dataclass(frozen=True)
class Question:
    text: str  # the question as asked: the recall query
    answer: str  # normalized
    evidence: list[str]


def questions(conv: dict[str, Any]) -> list[Question]:
    """Each question with an answer and its evidence ids (category 5 out)."""
    out = []
    for qa in conv["qa"]:
        if qa.get("category") == 5 or "answer" not in qa:
            continue
        answer = normalize(str(qa["answer"]))
        if answer and qa.get("evidence"):
            out.append(Question(str(qa.get("question", "")), answer,
                                [str(e) for e in qa["evidence"]]))  # fmt: skip
    return out
