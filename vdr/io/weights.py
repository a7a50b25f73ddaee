"""Which weights a model folder is read from: safetensors, and a pickle only when the user asks.

A ``pytorch_model.bin`` (or ``*.pt`` / ``*.pth`` / ``*.ckpt``) is a Python pickle: loading it runs
the unpickler on the file, which ``torch.load(weights_only=True)`` restricts but does not make a
safe format. vdr reads ``*.safetensors`` weights only, unless the caller opts in with
``allow_pickle`` (``--backend-option semantic.allow_pickle_weights=true`` for the semantic backend,
``--allow-pickle-weights`` for ``vdr rewrite --local``), for a checkpoint from a source the user
trusts. Every loader of model weights asks here (:func:`loader_kwargs`, :func:`load_state_dict`),
so the rule is built in one place.

This module imports nothing heavy at import time.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError

__all__ = ["PICKLE_SUFFIXES", "pickle_only", "check_weights", "loader_kwargs", "load_state_dict", "CONVERT_HINT"]

#: Weight-file suffixes that are pickles.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")

#: How to convert a trusted pickle checkpoint once (``{f}``: the folder).
CONVERT_HINT = ("or convert it once, where you trust the file: python -c \"import torch; from safetensors.torch import save_file;"
                " save_file({{k: v.contiguous().clone() for k, v in torch.load('{f}/pytorch_model.bin', weights_only=True).items()}},"
                " '{f}/model.safetensors', metadata={{'format': 'pt'}})\"")


def pickle_only(folder: Path) -> list[str]:
    """Names of the pickle weight files in ``folder`` when it holds no ``*.safetensors`` (else ``[]``)."""
    folder = Path(folder)
    if not folder.is_dir() or any(folder.glob("*.safetensors")):
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix in PICKLE_SUFFIXES)


def check_weights(folder: str | Path | None, *, allow_pickle: bool, what: str, opt_in: str) -> None:
    """Refuse a local model folder whose only weights are pickles, unless ``allow_pickle``.

    Args:
        folder: the model folder (``None`` or a hub name: nothing to check here; the loader then
            asks for safetensors through :func:`loader_kwargs`).
        allow_pickle: the user's explicit opt-in.
        what: the model's role in the message (``"semantic model"``).
        opt_in: the option that opts in, as the user types it.

    Raises:
        InputError: the folder holds pickle weights only; the message names the folder, the file,
            the option and how to convert the checkpoint to safetensors.
    """
    if folder is None or allow_pickle or not Path(folder).is_dir():
        return
    names = pickle_only(Path(folder))
    if names:
        raise _refused(Path(folder), names, what, opt_in)


def _refused(folder: Path, names: list[str], what: str, opt_in: str) -> InputError:
    """The error for pickle weights read without the opt-in."""
    return InputError(f"{what} {folder}: its weights are {', '.join(names)}, a pickle, and vdr reads *.safetensors only."
                      f" If you trust where it comes from, pass {opt_in}, " + CONVERT_HINT.format(f=folder.as_posix()))


def loader_kwargs(allow_pickle: bool) -> dict:
    """Keywords for transformers' ``from_pretrained`` (and sentence-transformers' ``model_kwargs``):
    ``{"use_safetensors": True}`` (transformers then never falls back to ``pytorch_model.bin``)
    unless ``allow_pickle``; ``{}`` with it (transformers' own choice, safetensors first)."""
    return {} if allow_pickle else {"use_safetensors": True}


def load_state_dict(path: Path, *, allow_pickle: bool, what: str, opt_in: str) -> dict:
    """``{name: tensor}`` of the weights file ``path``: safetensors, or (with ``allow_pickle``) a
    pickle read by ``torch.load(map_location="cpu", weights_only=True)``.

    Raises:
        InputError: a pickle without ``allow_pickle`` (see :func:`check_weights`), or a file that
            cannot be read (the file is named).
    """
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path), device="cpu")
        if not allow_pickle:
            raise _refused(path.parent, [path.name], what, opt_in)
        import torch

        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except InputError:
        raise
    except Exception as e:  # a damaged or foreign file: one clear error naming it
        raise InputError(f"cannot read the weights of {what}: {type(e).__name__}: {e}", path=path) from e
    if not isinstance(state, dict):
        raise InputError(f"{what}: {path.name} holds a {type(state).__name__}, not a state dict", path=path)
    return state
