"""Where rewrites come from: an OpenAI-compatible chat endpoint (:class:`vdr.llm.ChatClient`, the
client the judge uses too: retries, backoff, call budget, concurrency) or a local transformers
causal LM (:class:`LocalGenerator`). Both answer ``answer(item, messages, deadline=...)`` with a
:class:`vdr.llm.Answer` (and ``ask``, its text).
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

from ..errors import InputError
from ..llm import Answer, AnswerTruncated, BudgetExhausted, ChatClient, LLMCallError, LLMSettings

__all__ = ["endpoint_generator", "LocalGenerator"]


def endpoint_generator(settings: LLMSettings) -> ChatClient:
    """The shared chat client (:class:`vdr.llm.ChatClient`) configured for rewriting.

    Args:
        settings: endpoint, model and the other endpoint settings (:class:`vdr.llm.LLMSettings`;
            ``vdr rewrite``'s defaults are :data:`vdr.rewrite.runner.REWRITE_LLM`).

    Raises:
        InputError: no endpoint or no model.
        LLMConfigError: a bad count (concurrency < 1, max_retries < 0, budget < 0).
    """
    if not settings.endpoint:
        raise InputError("no endpoint: give --endpoint URL (an OpenAI-compatible base URL such as http://localhost:8000/v1) or --local MODEL_DIR")
    if not settings.model:
        raise InputError("no model: give --model NAME (the model name the endpoint serves)")
    return ChatClient(settings, label="rewrite")


def _weights_digest(folder: Path) -> str:
    """sha256 of the folder's first weights file (``model.safetensors`` or shard index), for cache keys."""
    for name in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"):
        f = folder / name
        if f.is_file():
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            return f"{name}:{h.hexdigest()[:16]}"
    return "no-weights-file"


class LocalGenerator:
    """Greedy generation with a local transformers causal LM (one request at a time).

    Args:
        model_dir: a local model folder (tokenizer + weights).
        device: ``"cpu"``, ``"cuda"``, ... (default: CUDA when available).
        max_new_tokens: generation limit; an answer that reaches it is truncated (a failed query).
        budget: most generations (``None``: unlimited).
        trust_remote_code: allow the checkpoint's own code (only for checkpoints you trust).
        allow_pickle_weights: read ``pytorch_model.bin`` weights (a pickle, :mod:`vdr.io.weights`)
            when the folder has no ``*.safetensors`` (only for checkpoints you trust).

    Attributes:
        model: ``"local:<folder name>@<weights digest>"`` (the cache key's model).

    Raises:
        InputError: not a folder, or a model/tokenizer that cannot be loaded.
    """

    concurrency = 1

    def __init__(self, model_dir: str | Path, *, device: str | None = None, max_new_tokens: int = 256, budget: int | None = None,
                 trust_remote_code: bool = False, allow_pickle_weights: bool = False) -> None:
        folder = Path(model_dir).expanduser()
        if not folder.is_dir():
            raise InputError("--local needs a model folder (tokenizer and weights)", path=folder)
        from ..io.weights import check_weights, loader_kwargs

        check_weights(folder, allow_pickle=allow_pickle_weights, what="--local model", opt_in="--allow-pickle-weights")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
            self.lm = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=trust_remote_code,
                                                           **loader_kwargs(allow_pickle_weights)).to(self.device).eval()
        except Exception as e:  # any loader failure becomes one clear input error
            raise InputError(f"cannot load a causal LM from {folder}: {type(e).__name__}: {e}") from e
        self.model = f"local:{folder.resolve().name}@{_weights_digest(folder)}"
        self.max_new_tokens, self.budget = int(max_new_tokens), budget
        self.calls = 0
        self._lock = threading.Lock()

    def config(self) -> dict:
        """JSON-ready settings."""
        return {"model": self.model, "device": self.device, "max_new_tokens": self.max_new_tokens, "decoding": "greedy", "budget": self.budget}

    def _prompt(self, messages: list[dict]) -> str:
        if getattr(self.tok, "chat_template", None):
            return self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return "\n\n".join(m["content"] for m in messages) + "\n"

    def answer(self, item, messages: list[dict], *, deadline: float | None = None) -> Answer:
        """:meth:`ask`'s text as an :class:`vdr.llm.Answer` (a local model's answer is plain text)."""
        return Answer(self.ask(item, messages, deadline=deadline))

    def ask(self, item, messages: list[dict], *, deadline: float | None = None) -> str:
        """Generate an answer to ``messages`` (greedy).

        Raises:
            BudgetExhausted: the generation budget is spent. AnswerTruncated: ``max_new_tokens``
                reached without an end-of-sequence token. LLMCallError: the deadline passed.
        """
        import torch

        with self._lock:
            if self.budget is not None and self.calls >= self.budget:
                raise BudgetExhausted(f"the budget of {self.budget} generations is spent")
            self.calls += 1
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise LLMCallError(f"deadline passed for {item.describe()} before generation")
            enc = self.tok(self._prompt(messages), return_tensors="pt", add_special_tokens=False).to(self.device)
            kw = {"max_time": left} if left is not None else {}
            with torch.inference_mode():
                out = self.lm.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False,
                                       pad_token_id=self.tok.pad_token_id or self.tok.eos_token_id, **kw)
            new = out[0, enc["input_ids"].shape[1]:].tolist()
        eos = self.tok.eos_token_id
        if deadline is not None and time.monotonic() > deadline:
            raise LLMCallError(f"deadline passed for {item.describe()} during generation")
        if len(new) >= self.max_new_tokens and (not new or new[-1] != eos):
            raise AnswerTruncated(f"answer for {item.describe()} reached max_new_tokens={self.max_new_tokens}")
        return self.tok.decode(new, skip_special_tokens=True)
