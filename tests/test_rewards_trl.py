"""TRL GRPOTrainer runs 2 steps on CPU with vdr's reward function (the wiring, not learning)."""

import pytest

from rewards_fixtures import build_tiny_causal_lm, make_passages
from vdr.rewards.rewarder import CompletionReward, Rewarder, build_backend

trl = pytest.importorskip("trl", reason="TRL is not installed (pip install 'vdr[test]')")


@pytest.mark.slow
def test_grpo_trainer_two_steps_with_vdr_reward(tmp_path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    texts, queries, qrels = make_passages()
    rewarder = Rewarder(build_backend("lexical", texts), qrels, metric="ndcg@3")
    reward = CompletionReward(rewarder, metric="ndcg@3")
    calls = []

    def spy(prompts, completions, **kwargs):  # records what TRL passes, then defers to vdr
        out = reward(prompts=prompts, completions=completions, **kwargs)
        calls.append((list(kwargs["query_id"]), list(completions), out, sorted(kwargs)))
        return out

    spy.__name__ = reward.__name__
    folder = build_tiny_causal_lm(tmp_path / "lm")
    model = AutoModelForCausalLM.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    qids = sorted(queries)[:4]
    data = Dataset.from_dict({"prompt": [f"Rewrite: {queries[q]}\n" for q in qids], "query_id": qids})
    args = trl.GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=4, num_generations=4,
                          max_completion_length=8, learning_rate=1e-4, logging_steps=1, save_strategy="no", report_to=[],
                          use_cpu=True, bf16=False, seed=0, dataloader_num_workers=0)
    trainer = trl.GRPOTrainer(model=model, reward_funcs=[spy], args=args, train_dataset=data, processing_class=tok)
    trainer.train()
    assert trainer.state.global_step == 2
    assert len(calls) >= 2
    for ids, comps, out, kw in calls:
        assert len(ids) == len(comps) == len(out) and set(ids) <= set(qids)
        assert all(isinstance(x, float) for x in out)
        # each reward is vdr's value of that completion's text for its query id
        assert out == rewarder.score(ids, [c.strip() for c in comps])
        assert "trainer_state" in kw and "completion_ids" in kw
    logged = [h for h in trainer.state.log_history if f"rewards/{reward.__name__}/mean" in h]
    assert len(logged) == 2
    assert reward.stats["completions"] == sum(len(c[1]) for c in calls)
    # training health (issue 37.4) reaches TRL's logs through log_metric
    assert all("vdr/zero_advantage_share" in h and "vdr/length_words" in h for h in logged)
    assert reward.health.snapshot()["steps"] == len(calls)
