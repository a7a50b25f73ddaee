"""Which weights a model folder is read from: safetensors, and a pickle only when the user asks.

A ``pytorch_model.bin`` (or one of its shards) is a Python pickle: reading it runs the
unpickler on the file, which a restricted unpickler narrows but does not make a safe format. vdr
never unpickles a file itself. It reads ``*.safetensors`` weights only, unless the caller opts in with
``allow_pickle`` (``--backend-option semantic.allow_pickle_weights=true`` for the semantic backend,
``--allow-pickle-weights`` for ``vdr rewrite --local``), for a checkpoint from a source the user
trusts; the pickle is then read by transformers' own checkpoint reader
(``transformers.modeling_utils.load_state_dict``, restricted to weights), the one that reads the
rest of the model. Every loader of model weights asks here (:func:`loader_kwargs`, :func:`load_state_dict`),
so the rule is built in one place. A refusal prints the command that converts the checkpoint
once (:func:`convert_command`).

This module imports nothing heavy at import time.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from ..errors import InputError

__all__ = ["PICKLE_WEIGHTS", "pickle_only", "check_weights", "convert_command", "loader_kwargs", "load_state_dict"]

#: The pickle weight files transformers and sentence-transformers read when a folder has no
#: safetensors: ``pytorch_model.bin`` and its shards ``pytorch_model-00001-of-00003.bin``.
PICKLE_WEIGHTS = re.compile(r"pytorch_model(-\d+-of-\d+)?\.bin")


def pickle_only(folder: Path) -> list[str]:
    """The pickle weight files (:data:`PICKLE_WEIGHTS`) a loader would read from ``folder`` or one of
    its subfolders (sentence-transformers modules such as ``2_Dense/``), each in a folder without
    ``*.safetensors``, as paths relative to ``folder`` (sorted; empty when there are none)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for d in [folder, *sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))]:
        if not any(d.glob("*.safetensors")):
            found += [f.relative_to(folder).as_posix() for f in sorted(d.iterdir()) if f.is_file() and PICKLE_WEIGHTS.fullmatch(f.name)]
    return found


def convert_command(folder: Path, names: list[str]) -> str:
    """A shell command (POSIX quoting) that converts the pickle files ``names`` (relative to
    ``folder``) to ``model.safetensors`` beside them, shards of one folder merged into one file, with
    this Python (``sys.executable``): transformers' checkpoint reader (restricted to weights), then
    safetensors' ``save_file``."""
    groups: dict[str, list[str]] = {}
    for n in names:
        f = Path(folder).absolute() / n
        groups.setdefault(str(f.parent), []).append(str(f))
    jobs = sorted(groups.items())
    code = ("from transformers.modeling_utils import load_state_dict; from safetensors.torch import save_file; "
            f"[save_file({{k: v.contiguous().clone() for f in fs for k, v in load_state_dict(f).items()}}, "
            f"d + '/model.safetensors', metadata={{'format': 'pt'}}) for d, fs in {jobs!r}]")
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def check_weights(folder: str | Path | None, *, allow_pickle: bool, what: str, opt_in: str) -> None:
    """Refuse a local model folder whose weights are pickles, unless ``allow_pickle``.

    Args:
        folder: the model folder (``None`` or a hub name: nothing to check here; the loader then
            asks for safetensors through :func:`loader_kwargs`).
        allow_pickle: the user's explicit opt-in.
        what: the model's role in the message (``"semantic model"``).
        opt_in: the option that opts in, as the user types it.

    Raises:
        InputError: the folder (or a module subfolder) holds pickle weights and no safetensors; the
            message names the folder, the files, the option and the command that converts them
            (:func:`convert_command`).
    """
    if folder is None or allow_pickle or not Path(folder).is_dir():
        return
    names = pickle_only(Path(folder))
    if names:
        raise _refused(Path(folder), names, what, opt_in)


def _refused(folder: Path, names: list[str], what: str, opt_in: str) -> InputError:
    """The error for pickle weights read without the opt-in."""
    return InputError(f"{what} {folder}: its weights are {', '.join(names)}, a pickle, and vdr reads *.safetensors only."
                      f" If you trust where it comes from, pass {opt_in}, or convert it once: {convert_command(folder, names)}")


def loader_kwargs(allow_pickle: bool) -> dict:
    """Keywords for transformers' ``from_pretrained`` (and sentence-transformers' ``model_kwargs``):
    ``{"use_safetensors": True}`` (transformers then never falls back to ``pytorch_model.bin``)
    unless ``allow_pickle``; ``{}`` with it (transformers' own choice, safetensors first)."""
    return {} if allow_pickle else {"use_safetensors": True}


def load_state_dict(path: Path, *, allow_pickle: bool, what: str, opt_in: str) -> dict:
    """``{name: tensor}`` of the weights file ``path``: safetensors, or (with ``allow_pickle``) a
    pickle read by transformers' checkpoint reader (``transformers.modeling_utils.load_state_dict``,
    restricted to weights, on the CPU), as transformers reads the model's own weights.

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
        from transformers.modeling_utils import load_state_dict as read_checkpoint

        state = read_checkpoint(str(path))
    except InputError:
        raise
    except Exception as e:  # a damaged or foreign file: one clear error naming it
        raise InputError(f"cannot read the weights of {what}: {type(e).__name__}: {e}", path=path) from e
    if not isinstance(state, dict):
        raise InputError(f"{what}: {path.name} holds a {type(state).__name__}, not a state dict", path=path)
    return state
