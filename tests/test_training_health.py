"""Training health on the reward side (issue 37.4): every signal of a synthetic GRPO training log
computed by hand, the warnings at the right steps, and the TRL, verl and ``/stats`` paths.

The log: 12 steps x 4 groups (query ids q0, q1, q2 with an English query, q3 with a Russian one)
x 4 completions, fed through the TRL reward function exactly as ``GRPOTrainer`` calls it. A rewrite
of L words is ``"tax " * L`` (4L - 1 characters) for q0-q2 and ``"налог " * L`` (6L - 1 characters)
for q3; gibberish in another script keeps the word lengths: ``"жжж"`` for q0-q2, ``"xxxxx"`` for q3.
Health settings: baseline_steps=4, window=2, the default thresholds (zero advantage 0.5, length
drift 0.5-2.0, format breaks, empty and off-script 0.1 each).

| step | words L | groups with equal rewards | format breaks | empty | off-script |
|------|---------|---------------------------|---------------|-------|------------|
| 1-4  | 4       | none                      | 0             | 0     | 0          |
| 5    | 8       | q0                        | 0             | 0     | 0          |
| 6    | 8       | q0 q1                     | 0             | 0     | 0          |
| 7    | 12      | q0 q1 q2                  | 0             | 0     | q0#4       |
| 8    | 12      | all                       | 0             | 0     | q0#4 q3#4  |
| 9    | 14      | all (reward 0)            | q1#3 q1#4     | q2#3 q2#4 | q0 x4  |
| 10   | 16      | all (reward 0)            | q1 x4         | 0     | q0 x4      |
| 11   | 4       | none                      | 0             | 0     | 0          |
| 12   | 4       | all (reward 0)            | q1#3 q1#4     | 0     | 0          |
"""

from __future__ import annotations

import json
import math
import warnings
from types import SimpleNamespace

import pytest

from vdr.errors import InputError, VdrWarning
from vdr.rewards.health import HealthOptions, TrainingHealth, char_script, dominant_script, script_share
from vdr.rewards.rewarder import CompletionReward

IDS = ["q0", "q1", "q2", "q3"]
PROMPTS = {"q0": "Rewrite the query: tax return form", "q1": "Rewrite the query: tax refund date",
           "q2": "Rewrite the query: tax office hours", "q3": "Перепиши запрос: налог на доходы"}
WORD = {"q0": "tax", "q1": "tax", "q2": "tax", "q3": "налог"}
GIB = {"q0": "жжж", "q1": "жжж", "q2": "жжж", "q3": "xxxxx"}
DISTINCT = [0.0, 0.5, 1.0, 1.5]

#: step -> (words L, query ids whose 4 rewards are equal, {(qid, n): kind}) with kind
#: "gib" (gibberish of L words), "break" (no <rewrite> tags), "empty" (<rewrite></rewrite>).
PLAN = {
    1: (4, [], {}), 2: (4, [], {}), 3: (4, [], {}), 4: (4, [], {}),
    5: (8, ["q0"], {}), 6: (8, ["q0", "q1"], {}),
    7: (12, ["q0", "q1", "q2"], {("q0", 3): "gib"}),
    8: (12, IDS, {("q0", 3): "gib", ("q3", 3): "gib"}),
    9: (14, IDS, {("q1", 2): "break", ("q1", 3): "break", ("q2", 2): "empty", ("q2", 3): "empty",
                  **{("q0", n): "gib" for n in range(4)}}),
    10: (16, IDS, {**{("q1", n): "break" for n in range(4)}, **{("q0", n): "gib" for n in range(4)}}),
    11: (4, [], {}),
    12: (4, IDS, {("q1", 2): "break", ("q1", 3): "break"}),
}
COLLAPSED = {9, 10, 12}  # every reward 0


def step_batch(step: int) -> tuple[list[str], list[str], list[str], list[float]]:
    """``(query ids, prompts, completions, rewards)`` of one step, grouped as TRL does (4 consecutive
    completions per prompt)."""
    words, equal, special = PLAN[step]
    ids, prompts, comps, rewards = [], [], [], []
    for q in IDS:
        for n in range(4):
            kind = special.get((q, n))
            text = " ".join([GIB[q] if kind == "gib" else WORD[q]] * words)
            comps.append("tax tax" if kind == "break" else "<rewrite></rewrite>" if kind == "empty" else f"<rewrite>{text}</rewrite>")
            ids.append(q)
            prompts.append(PROMPTS[q])
            rewards.append(0.0 if step in COLLAPSED else 1.0 if q in equal else DISTINCT[n])
    return ids, prompts, comps, rewards


class Scripted:
    """A scorer giving the planned rewards of the current step."""

    metric = "ndcg@3"

    def __init__(self) -> None:
        self.rewards: list[float] = []

    def score(self, query_ids, rewrites, metric=None):
        assert len(rewrites) == len(self.rewards)
        return list(self.rewards)


def health_settings(**kw) -> dict:
    return {"baseline_steps": 4, "window": 2, **kw}


#: Expected per-step signals (see the module docstring's table), the arithmetic in the comments.
# length_chars: q0-q2 rewrites have 4L - 1 characters, q3's 6L - 1.
EXPECTED = {
    # step: (zero_advantage_share, length_words, length_chars, length_drift, format_break, empty, off_script)
    1: (0 / 4, 4.0, (12 * 15 + 4 * 23) / 16, None, 0.0, 0.0, 0.0),  # chars 272/16 = 17.0; drift: baseline incomplete
    2: (0.0, 4.0, 17.0, None, 0.0, 0.0, 0.0),
    3: (0.0, 4.0, 17.0, None, 0.0, 0.0, 0.0),
    4: (0.0, 4.0, 17.0, 1.0, 0.0, 0.0, 0.0),  # baseline mean(4, 4, 4, 4) = 4; rolling mean(4, 4) = 4 -> 4/4
    5: (1 / 4, 8.0, (12 * 31 + 4 * 47) / 16, 1.5, 0.0, 0.0, 0.0),  # chars 560/16 = 35.0; drift mean(4, 8)/4 = 6/4
    6: (2 / 4, 8.0, 35.0, 2.0, 0.0, 0.0, 0.0),  # 0.5 and 2.0 are AT the thresholds: no warning; drift 8/4
    7: (3 / 4, 12.0, (12 * 47 + 4 * 71) / 16, 2.5, 0.0, 0.0, 1 / 16),  # chars 848/16 = 53.0; drift mean(8, 12)/4 = 10/4
    8: (4 / 4, 12.0, 53.0, 3.0, 0.0, 0.0, 2 / 16),  # drift 12/4
    # 14 completions with a rewrite (2 broken have none): 12 of 14 words + 2 empty -> words 168/14 = 12;
    # chars: q0 x4, q1 x2, q2 x2 of 4*14-1 = 55, q3 x4 of 6*14-1 = 83 -> (8*55 + 4*83)/14 = 772/14
    9: (1.0, 12.0, (8 * 55 + 4 * 83) / 14, 3.0, 2 / 16, 2 / 16, 4 / 16),  # drift mean(12, 12)/4
    # 12 with a rewrite of 16 words: q0, q2 (8 x 63 chars), q3 (4 x 95) -> 884/12; drift mean(12, 16)/4 = 14/4
    10: (1.0, 16.0, (8 * 63 + 4 * 95) / 12, 3.5, 4 / 16, 0.0, 4 / 16),
    11: (0.0, 4.0, 17.0, 2.5, 0.0, 0.0, 0.0),  # drift mean(16, 4)/4 = 10/4
    12: (1.0, 4.0, (10 * 15 + 4 * 23) / 14, 1.0, 2 / 16, 0.0, 0.0),  # 14 rewrites: chars 242/14; drift mean(4, 4)/4
}
NAMES = ("zero_advantage_share", "length_words", "length_chars", "length_drift", "format_break_share", "empty_share",
         "off_script_share")
#: (step, signal) of each warning: once per crossing (format breaks: 9, still above at 10, back at 11, again at 12).
WARNINGS = [(7, "zero_advantage_share"), (7, "length_drift"), (8, "off_script_share"), (9, "format_break_share"),
            (9, "empty_share"), (12, "zero_advantage_share"), (12, "format_break_share")]


def run_trl_log(reward: CompletionReward, scorer: Scripted):
    """Call ``reward`` as GRPOTrainer does for the 12 steps; ``(metrics per step, extra columns per
    step, warnings as (step, signal))``."""
    metrics, extras, warned = {}, {}, []
    for step in PLAN:
        ids, prompts, comps, rewards = step_batch(step)
        scorer.rewards = rewards
        logged, extra = {}, {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = reward(prompts=prompts, completions=comps, completion_ids=[[1]] * len(comps), query_id=ids,
                         trainer_state=SimpleNamespace(global_step=step - 1), log_extra=lambda c, v: extra.__setitem__(c, v),
                         log_metric=lambda k, v: logged.__setitem__(k, v))
        assert out == rewards
        metrics[step], extras[step] = logged, extra
        for w in caught:
            assert issubclass(w.category, VdrWarning), w.message
            msg = str(w.message)
            warned.append((step, msg.split(" = ")[0].removeprefix("training health: ")))
            assert f"at step {step} (trainer step {step - 1})" in msg and "threshold" in msg
    return metrics, extras, warned


def test_synthetic_training_log_through_trl():
    scorer = Scripted()
    reward = CompletionReward(scorer, pattern="rewrite", format_penalty=0.0, penalty_mode="add",
                              health=health_settings())
    metrics, extras, warned = run_trl_log(reward, scorer)
    for step, want in EXPECTED.items():
        got = metrics[step]
        for name, value in zip(NAMES, want):
            key = f"vdr/{name}"
            if value is None:
                assert key not in got, (step, name)
            else:
                assert got[key] == pytest.approx(value, abs=1e-12), (step, name, got[key], value)
    assert warned == WARNINGS
    # the per-completion column of TRL's completions table
    assert extras[9]["vdr_health"][:4] == ["off_script"] * 4
    assert extras[9]["vdr_health"][6:12] == ["format_break", "format_break", "", "", "empty", "empty"]
    assert extras[1]["vdr_health"] == [""] * 16
    snap = reward.health.snapshot()
    json.dumps(snap)  # JSON-ready
    assert snap["steps"] == 12 and snap["pending"] == 0 and snap["baseline_length_words"] == 4.0
    t = snap["totals"]
    # zero-advantage groups: 0+0+0+0 (steps 1-4) +1+2+3+4+4+4+0+4 = 22 of 12*4 = 48 groups
    assert (t["completions"], t["groups"], t["zero_advantage_groups"]) == (192, 48, 22)
    assert t["zero_advantage_share"] == 22 / 48
    # breaks 2 + 4 + 2 = 8; empty 2; off-script 1 + 2 + 4 + 4 = 11 (of 192)
    assert (t["format_breaks"], t["empty"], t["off_script"], t["script_unchecked"]) == (8, 2, 11, 0)
    assert (t["format_break_share"], t["empty_share"], t["off_script_share"]) == (8 / 192, 2 / 192, 11 / 192)
    assert [(a["step"], a["signal"]) for a in snap["alerts"]] == WARNINGS and t["alerts"] == 7
    assert [h["label"] for h in snap["history"]] == list(range(12))


def test_health_off_and_bad_settings():
    scorer = Scripted()
    reward = CompletionReward(scorer, pattern="rewrite", health=False)
    ids, prompts, comps, scorer.rewards = step_batch(12)
    logged = {}
    reward(prompts=prompts, completions=comps, query_id=ids, log_metric=logged.__setitem__)
    assert reward.health is None and set(logged) == {"vdr/format_broken_fraction", "vdr/empty_fraction"}
    with pytest.raises(InputError, match="baseline_steps must be >= 1, got 0"):
        TrainingHealth(baseline_steps=0)
    with pytest.raises(InputError, match="zero_advantage_max must be a finite number >= 0 or None, got -1"):
        HealthOptions(zero_advantage_max=-1.0)
    with pytest.raises(InputError, match="unknown TrainingHealth option"):
        TrainingHealth(zero_adv=0.3)
    with pytest.raises(InputError, match="verl_dict=True .* needs health"):
        CompletionReward(scorer, health=False, verl_dict=True)
    with pytest.raises(InputError, match="3 query ids, 2 rewards"):
        TrainingHealth().record(["a", "b", "c"], [1.0, 2.0], ["x", "y", "z"])


def test_script_rule():
    assert [char_script(c) for c in "aÄЖ中カ한ا1 -"] == ["LATIN", "LATIN", "CYRILLIC", "CJK", "CJK", "HANGUL", "ARABIC", None, None, None]
    assert dominant_script("налог 2023 tax") == "CYRILLIC"  # 5 Cyrillic letters vs 3 Latin
    assert script_share("tax налог", "LATIN") == 3 / 8 and script_share("2023 !", "LATIN") is None
    h = TrainingHealth(warn=False)
    assert h.off_script("2023", "tax") is False  # no letters: never off-script
    assert h.off_script("Steuer налог", None) is None  # no reference, no expected_script: unchecked
    assert TrainingHealth(expected_script="latin").off_script("ab налог", None) is True  # 2 of 7 letters Latin < 0.5
    assert h.off_script("tax налоги", "tax refund") is True and h.off_script("taxes налог", "tax refund") is False  # 5 of 10: not < 0.5


def test_verl_dicts_per_sample_and_batch():
    scorer = Scripted()
    reward = CompletionReward(scorer, pattern="rewrite", format_penalty=0.0, penalty_mode="add", verl_dict=True,
                              health=health_settings(step_size=16, warn=False))
    scorer.rewards = [1.0]
    assert reward.compute_score("d", "<rewrite>tax</rewrite>", "g", extra_info={"query_id": "q0"}) is not None
    reward.health.end_step()  # a one-completion step: no group of size >= 2
    assert reward.health.last["zero_advantage_share"] is None and reward.health.last["completions"] == 1
    ids, _, comps, rewards = step_batch(9)
    infos = [{"query_id": q, "query_text": PROMPTS[q].split(": ")[1]} for q in ids]
    outs = []
    for q, c, r, info in zip(ids, comps, rewards, infos):  # NaiveRewardManager: one completion per call
        scorer.rewards = [r]
        outs.append(reward.compute_score("d", c, "g", extra_info=info))
    keys = {"score", "vdr_format_break", "vdr_empty", "vdr_off_script", "vdr_rewrite_words", "vdr_zero_advantage_share",
            "vdr_length_drift"}
    assert all(set(o) == keys for o in outs) and [o["score"] for o in outs] == rewards
    mean = lambda k: sum(o[k] for o in outs) / len(outs)  # noqa: E731 -- verl's per-batch mean of reward_extra_info
    assert (mean("vdr_format_break"), mean("vdr_empty"), mean("vdr_off_script")) == (2 / 16, 2 / 16, 4 / 16)
    assert math.isnan(outs[0]["vdr_zero_advantage_share"])  # the step is still open
    assert outs[-1]["vdr_zero_advantage_share"] == 1.0 and reward.health.steps == 2  # the 16th completion closed it
    assert outs[6]["vdr_rewrite_words"] != outs[6]["vdr_rewrite_words"] and outs[0]["vdr_rewrite_words"] == 14.0  # broken: NaN
    scorer.rewards = rewards  # verl's batch manager: lists in, a list of dicts out, one step
    batch = reward.compute_score(["d"] * 16, comps, ["g"] * 16, infos)
    assert [o["vdr_off_script"] for o in batch] == [o["vdr_off_script"] for o in outs] and reward.health.steps == 3
    plain = CompletionReward(scorer, pattern="rewrite", health=health_settings(warn=False))
    scorer.rewards = [1.0]
    assert plain.compute_score("d", "<rewrite>tax</rewrite>", "g", extra_info={"query_id": "q0"}) == 1.0  # a float by default


def test_group_size_and_abstained_rewards():
    h = TrainingHealth(group_size=2, warn=False)
    # groups of 2 consecutive: (1, 1) equal, (1, None) has 1 reward -> not counted, (0, 0.5) not equal -> 1/2
    s = h.record(["a", "a", "a", "a", "b", "b"], [1.0, 1.0, 1.0, None, 0.0, 0.5], ["x"] * 6)
    assert (s["groups"], s["zero_advantage_groups"], s["zero_advantage_share"]) == (2, 1, 0.5)
    by_id = TrainingHealth(warn=False).record(["a", "a", "a", "a", "b", "b"], [1.0, 1.0, 1.0, None, 0.0, 0.5], ["x"] * 6)
    assert by_id["zero_advantage_share"] == 0.5  # a: (1, 1, 1) equal; b: (0, 0.5) not


def test_stats_endpoint():
    pytest.importorskip("fastapi", reason="vdr serve needs fastapi + uvicorn")
    httpx = pytest.importorskip("httpx")
    from rewards_fixtures import make_passages, running
    from vdr.rewards.rewarder import Rewarder, build_backend
    from vdr.rewards.serve import create_app

    texts, _, qrels = make_passages()
    health = TrainingHealth(expected_script="LATIN", warn=False)
    app = create_app(Rewarder(build_backend("lexical", texts), qrels), token="t0k", health=health)
    ids = ["q0", "q0", "q1", "q1", "q2", "q2"]
    rws = ["volcano lava", "volcano lava", "violin", None, "ice glacier", "лёд ледник"]
    with running(app) as url:
        assert httpx.post(url + "/reward", json={"query_ids": ids, "rewrites": rws}).status_code == 401
        r = httpx.post(url + "/reward", json={"query_ids": ids, "rewrites": rws}, headers={"Authorization": "Bearer t0k"}).json()
        stats = httpx.get(url + "/stats")  # no token needed, as /health
        assert stats.status_code == 200
        snap = stats.json()
        rr = httpx.post(url + "/retrieve", json={"queries": ["volcano", "volcano"], "query_ids": ["q0", "q0"], "topk": 10},
                        headers={"Authorization": "Bearer t0k"}).json()
        after = httpx.get(url + "/stats").json()
    rew = r["rewards"]
    assert rew[0] == rew[1] and rew[2] > rew[3] == 0.0 and rew[4] > rew[5] == 0.0  # q0 equal; q1, q2 not
    last = snap["last"]
    assert snap["steps"] == 1 and last["zero_advantage_share"] == 1 / 3  # q0 of (q0, q1, q2)
    assert last["format_break_share"] == 1 / 6  # the null rewrite
    assert last["empty_share"] == 0.0 and last["off_script_share"] == 1 / 6  # "лёд ледник" against LATIN
    assert last["length_words"] == (2 + 2 + 1 + 2 + 2) / 5 and last["length_chars"] == (12 + 12 + 6 + 11 + 10) / 5
    assert [a["signal"] for a in snap["alerts"]] == ["format_break_share", "off_script_share"]  # 1/6 > 0.1 each
    assert rr["result"][0] == rr["result"][1] and after["steps"] == 2 and after["last"]["zero_advantage_share"] == 1.0


def test_stats_with_the_queries_texts():
    """`vdr serve --queries FILE`: the server's tracker takes each query's script from its text, so a
    Cyrillic rewrite of a Latin query is off-script without any expected_script; `--health-option`
    values are read by the fields' types."""
    pytest.importorskip("fastapi", reason="vdr serve needs fastapi + uvicorn")
    httpx = pytest.importorskip("httpx")
    from rewards_fixtures import make_passages, running
    from vdr.cli.serve import _health_options
    from vdr.rewards.rewarder import Rewarder, build_backend
    from vdr.rewards.serve import create_app

    texts, _, qrels = make_passages()
    health = TrainingHealth(_health_options(["off_script_max=0.3", "warn=false"]))
    assert health.options.off_script_max == 0.3 and health.options.warn is False
    health.query_texts = {"q0": "volcano", "q1": "violin", "q2": "ice"}
    app = create_app(Rewarder(build_backend("lexical", texts), qrels), health=health)
    with running(app) as url:
        httpx.post(url + "/reward", json={"query_ids": ["q0", "q1", "q2"], "rewrites": ["volcano lava", "скрипка", "ice"]})
        last = httpx.get(url + "/stats").json()["last"]
    assert last["off_script_share"] == 1 / 3  # q1's Cyrillic rewrite against its Latin query text
    with pytest.raises(InputError, match="unknown TrainingHealth option"):
        _health_options(["bogus=1"])
