"""Judge answers from open reasoning models: a leading <think> block and code fences are removed,
then strict JSON is required (issue 13, item 11)."""

from __future__ import annotations

import pytest

from vdr.judge.client import parse_answer, strip_wrappers

LABELS = ["A", "B"]
JSON = '{"scores": {"A": 3, "B": -1.5}}'


@pytest.mark.parametrize(
    "text",
    [
        JSON,
        f"<think>\nA shows the table, B does not.\n</think>\n\n{JSON}",
        f"<think>reasoning</think>```json\n{JSON}\n```",
        f"```json\n{JSON}\n```",
        f"```\n{JSON}\n```",
        f"  <think></think>{JSON}  ",
        f"the chat template opened the block already\n</think>\n{JSON}",
    ],
)
def test_wrapped_answers_parse(text):
    assert parse_answer(text, "tournament", LABELS) == [3.0, -1.5]


@pytest.mark.parametrize(
    "text, words",
    [
        (f"<think>never closed {JSON}", "unterminated <think> block"),
        (f"```json\n{JSON}", "unterminated code fence"),
        (f"Here you go: {JSON}", "not JSON"),
        (f"<think>x</think> Sure! {JSON}", "not JSON"),
        (f"{JSON}\nHope this helps", "not JSON"),
        (f"<think>a</think><think>b</think>{JSON}", "not JSON"),
        ('{"scores": {"A": 3, "A": 1, "B": 0}}', "appears twice"),
        (None, "empty answer"),
    ],
)
def test_anything_else_stays_strict(text, words):
    with pytest.raises(ValueError, match=words):
        parse_answer(text, "tournament", LABELS)


def test_rubric_answer_inside_think_and_fence():
    ans = '{"answers": {"A": {"C1": 1, "C2": 0, "C3": "1", "C4": 0, "C5": 1}}}'
    assert parse_answer(f"<think>ok</think>\n```json\n{ans}\n```", "rubric", ["A"]) == [(1, 0, 1, 0, 1)]
    assert strip_wrappers("<think>x</think>\n```\n{}\n```") == "{}"


THINK = {"type": "thinking", "thinking": [{"type": "text", "text": "doc A shows the table"}]}


@pytest.mark.parametrize(
    "content",
    [
        [THINK, {"type": "text", "text": JSON}],  # Mistral Magistral
        [{"type": "text", "text": JSON}],  # OpenAI-style text parts
        [{"type": "text", "text": JSON[:10]}, {"type": "text", "text": JSON[10:]}],  # chunks joined in order
        [{"type": "reasoning", "reasoning": "hm"}, {"type": "text", "text": f"```json\n{JSON}\n```"}],  # parts, then a fence
        [THINK, {"type": "text", "text": f"<think>more</think>{JSON}"}],  # thinking in both forms
        {"type": "text", "text": JSON},  # a single part object
    ],
)
def test_answers_given_as_content_parts_parse(content):
    """issue 26.3: the text parts are parsed, the thinking parts dropped (no 'list' has no 'strip')."""
    assert parse_answer(content, "tournament", LABELS) == [3.0, -1.5]


@pytest.mark.parametrize(
    "content, words",
    [
        ([THINK], "not JSON"),  # only thinking: no answer
        ([{"type": "image_url", "image_url": {"url": "x"}}], "type 'image_url'"),
        ([{"type": "text", "text": None}], "no string 'text'"),
        ([{"type": "refusal", "refusal": "I won't"}], "the model refused"),
        (7, "the content is a int"),
        ([THINK, {"type": "text", "text": f"Sure: {JSON}"}], "not JSON"),  # still strict after the parts are read
    ],
)
def test_unreadable_content_parts_are_a_value_error(content, words):
    with pytest.raises(ValueError, match=words):
        parse_answer(content, "tournament", LABELS)
