"""Metric-as-reward for RL query-rewriter training: :mod:`.rewarder` (the same backends, metric code
and query budget as :func:`vdr.evaluate`; TRL / verl adapters) and :mod:`.serve` (the HTTP reward
server of ``vdr serve``) and :mod:`.health` (training-health signals of a GRPO run, per step)."""

from .rewarder import (
    RankIncentive,
    RewardError,
    UnknownQueryError,
    RewardBatch,
    Rewarder,
    Extractor,
    CompletionReward,
    RemoteScorer,
    PRESETS,
    parse_reward_metric,
    cut_words,
    build_backend,
    TEXT_BACKENDS,
    BACKENDS,
    RANK_INCENTIVE,
    RewardOptions,
    CompletionOptions,
    BUDGET_PRESETS,

)
from .health import HealthOptions, TrainingHealth

__all__ = ["RankIncentive", "RewardError", "UnknownQueryError", "RewardBatch", "Rewarder", "Extractor", "CompletionReward", "RemoteScorer", "PRESETS", "parse_reward_metric", "cut_words", "build_backend", "TEXT_BACKENDS", "BACKENDS", "RANK_INCENTIVE", "RewardOptions", "CompletionOptions", "BUDGET_PRESETS", "HealthOptions", "TrainingHealth"]
