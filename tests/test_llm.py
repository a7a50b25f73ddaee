"""vdr.llm: the one OpenAI-compatible client module of judge and rewrite (settings, errors, answer
extraction). The HTTP behaviour is tested against the simulated server in test_judge_sim.py and
test_rewrite.py."""

import dataclasses

import pytest

import vdr.llm as llm
from vdr.errors import InputError


def test_settings_hide_the_key_and_are_shared_by_judge_and_rewrite():
    from vdr.judge.run import JUDGE_LLM, JudgeOptions
    from vdr.rewrite import RewriteOptions
    from vdr.rewrite.runner import REWRITE_LLM

    s = llm.LLMSettings(endpoint="http://h/v1", model="m", api_key="sk-SECRET")
    assert "sk-SECRET" not in repr(s) and "model='m'" in repr(s)
    assert type(JudgeOptions().llm) is type(RewriteOptions().llm) is llm.LLMSettings
    # each command keeps its own defaults (judge: 120 s, 4 retries, 2048 tokens; rewrite: 30 s, 2, 1024)
    assert (JUDGE_LLM.timeout, JUDGE_LLM.max_retries, JUDGE_LLM.max_tokens) == (120.0, 4, 2048)
    assert (REWRITE_LLM.timeout, REWRITE_LLM.max_retries, REWRITE_LLM.max_tokens) == (30.0, 2, 1024)
    assert JudgeOptions().llm == JUDGE_LLM and RewriteOptions().llm == REWRITE_LLM


def test_option_records_keep_functions_within_eight_parameters():
    """judge, rewrite, the judge client and the endpoint generator take option records."""
    import inspect

    from vdr.judge.client import JudgeClient
    from vdr.judge.run import judge
    from vdr.rewrite.generate import endpoint_generator
    from vdr.rewrite.runner import rewrite

    for f in (JudgeClient.__init__, llm.ChatClient.__init__, endpoint_generator):
        params = [p for p in inspect.signature(f).parameters if p != "self"]
        assert len(params) <= 8, (f, params)
    for f in (judge, rewrite):  # the listed signature is generated from the records (for help())
        code = f.__code__
        assert code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARKEYWORDS) <= 8
    names = set(inspect.signature(judge).parameters)
    assert {"endpoint", "judge_model", "budget", "k", "modality", "api_key", "json_mode", "corpus_dir"} <= names
    assert "model" not in names and "llm" not in names


def test_split_keywords_and_settings_from():
    values, rest = llm.split_keywords({"judge_model": "m", "model": "x", "timeout": 5, "k": 3}, {"judge_model": "model"})
    assert values == {"model": "m", "timeout": 5} and rest == {"model": "x", "k": 3}
    base = llm.LLMSettings(timeout=30.0)
    assert llm.settings_from(base, {"budget": 7}, what="f()") == dataclasses.replace(base, budget=7)
    with pytest.raises(TypeError, match=r"f\(\) got unknown option\(s\) 'tmeout'; known: endpoint, model"):
        llm.settings_from(base, {"tmeout": 1}, what="f()")


def test_judge_client_refuses_unknown_settings_and_counts():
    from vdr.judge.client import JudgeClient, JudgeConfigError

    with pytest.raises(TypeError, match="JudgeClient.*'retries'"):
        JudgeClient("http://127.0.0.1:9/v1", "m", retries=3)
    with pytest.raises(JudgeConfigError, match="concurrency must be >= 1"):
        JudgeClient("http://127.0.0.1:9/v1", "m", concurrency=0)
    with pytest.raises(llm.LLMConfigError, match="no LLM model"):
        llm.ChatClient(llm.LLMSettings(endpoint="http://127.0.0.1:9/v1"))


def test_judge_errors_are_the_llm_errors():
    """The judge's public error names stay (``vdr.judge.JudgeCallError`` ...) and are the shared classes."""
    import importlib

    J = importlib.import_module("vdr.judge")  # (vdr.judge is also the verb's name)

    assert (J.JudgeError, J.JudgeConfigError, J.JudgeOutputError, J.JudgeCallError, J.BudgetExhausted) == (
        llm.LLMError, llm.LLMConfigError, llm.LLMOutputError, llm.LLMCallError, llm.BudgetExhausted)
    assert issubclass(llm.AnswerTruncated, J.JudgeOutputError) and J.JudgeCache is llm.AnswerCache


def test_extractor_lives_in_llm_and_rewards_reexports_it():
    import vdr.rewards as R

    assert R.Extractor is llm.Extractor
    assert R.PRESETS["convsearch-r1"]["format_regex"] == llm.CONVSEARCH_FORMAT
    e = llm.Extractor("rewrite", llm.CONVSEARCH_FORMAT)
    assert e.extract("<think>a</think>\n<rewrite> x y </rewrite>") == ("x y", True)
    assert e.extract("<rewrite>x</rewrite>") == ("x", False)  # no <think> block: wrong format
    assert llm.Extractor("plain").extract("<think>never closed") == (None, False)
    assert llm.Extractor(r"<q>(.*?)</q>").extract("a <q> b </q>") == ("b", True)
    with pytest.raises(InputError, match="needs a group"):
        llm.Extractor(r"<q>.*</q>")


def test_answer_cache_round_trip_and_torn_line(tmp_path):
    path = tmp_path / "c.jsonl"
    c = llm.AnswerCache(path)
    c.put({"key": "a", "answer": [1]})
    c.put({"key": "b", "answer": [2]})
    with open(path, "a") as f:
        f.write('{"key": "c", "ans')  # a crash mid-write
    with pytest.warns(Warning, match="torn last cache line"):
        again = llm.AnswerCache(path)
    assert len(again) == 2 and again.get("b") == {"key": "b", "answer": [2]} and again.get("c") is None
