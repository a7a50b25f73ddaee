"""Versioned rewrite templates: shipped ones (``vdr/rewrite/template_files/*.toml``) and user files.

A template is a TOML file with the keys ``name``, ``version`` (part of every cache key: change it
whenever the wording changes), ``system`` (optional), ``user`` (with ``${question}`` and optionally
``${history}``; ``string.Template`` syntax, so other braces are literal), ``extract`` (how the rewrite
is read from the answer: ``plain``, ``rewrite``, ``answer`` or a regex with one group; see
:class:`vdr.llm.Extractor`) and ``description`` (optional).

History: the earlier turns, oldest first, rendered one per line as ``1. ...``; ``(no earlier
turns)`` when there are none. A word budget (``max_history_words``) drops the OLDEST turns first and
always keeps the current question; when the newest turn alone is over budget, its last words are
kept (the one query-budget rule, :func:`vdr.retrieve.budget.cut_words`).
"""

from __future__ import annotations

import string
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import InputError
from ..llm import Extractor
from ..retrieve.budget import cut_words
from ..types import Query

__all__ = ["Template", "load_template", "builtin_templates", "render_history", "NO_HISTORY"]

NO_HISTORY = "(no earlier turns)"


@dataclass(frozen=True)
class Template:
    """A parsed rewrite template (see the module docstring).

    Attributes:
        name, version, description, system, user, extract: the TOML keys.
        source: ``"builtin"`` or the file it was read from.
    """

    name: str
    version: str
    user: str
    system: str = ""
    extract: str = "plain"
    description: str = ""
    source: str = "builtin"

    def extractor(self) -> Extractor:
        """The :class:`~vdr.llm.Extractor` of ``extract`` (no format check)."""
        return Extractor(self.extract)

    def messages(self, query: Query, max_history_words: int | None = None) -> tuple[list[dict], int]:
        """Chat messages for ``query`` and the number of history turns dropped by the budget.

        Returns:
            ``([{"role": "system", ...}, {"role": "user", ...}], dropped_turns)``.
        """
        history, dropped = render_history(query.history, max_history_words)
        user = string.Template(self.user).safe_substitute(question=query.text, history=history)
        msgs = [{"role": "system", "content": self.system}] if self.system else []
        return msgs + [{"role": "user", "content": user}], dropped

    def to_json(self) -> dict:
        """``{"name", "version", "source"}`` (what results record)."""
        return {"name": self.name, "version": self.version, "source": self.source}


def render_history(history: tuple[str, ...], max_words: int | None) -> tuple[str, int]:
    """The numbered history within ``max_words`` words (oldest turns dropped first) and how many
    turns were dropped (a newest turn cut to its last words counts as dropped too)."""
    turns = list(history)
    dropped = 0
    if max_words is not None:
        while turns and sum(len(t.split()) for t in turns) > max_words:
            if len(turns) == 1:
                turns[0] = cut_words(turns[0], max_words)[0] if max_words else turns[0]  # the one budget rule (its last words)
                dropped += 1
                break
            turns.pop(0)
            dropped += 1
    if not turns:
        return NO_HISTORY, dropped
    first = 1 + len(history) - len(turns)
    return "\n".join(f"{first + i}. {t}" for i, t in enumerate(turns)), dropped


def builtin_templates() -> dict[str, Path]:
    """``{name: path}`` of the templates shipped with vdr."""
    folder = resources.files(__package__) / "template_files"
    return {p.name[: -len(".toml")]: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".toml")}


def load_template(name_or_path: str | Path) -> Template:
    """A shipped template by name (``conversational``, ``convsearch-r1``, ``rl-qr``) or a TOML file.

    Raises:
        InputError: an unknown name that is not a file, invalid TOML, a missing or mistyped key,
            a ``user`` text without ``${question}``, an invalid ``extract`` pattern.
    """
    shipped = builtin_templates()
    if str(name_or_path) in shipped:
        path, source = shipped[str(name_or_path)], "builtin"
    else:
        path, source = Path(name_or_path), str(name_or_path)
        if not path.is_file():
            raise InputError(f"unknown template {str(name_or_path)!r}: not a shipped template ({', '.join(sorted(shipped))}) nor a file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"invalid template TOML: {e}", path=path) from None
    for key in ("name", "version", "user"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise InputError(f"template needs a non-empty string {key!r}", path=path)
    for key in ("system", "extract", "description"):
        if key in data and not isinstance(data[key], str):
            raise InputError(f"template key {key!r} must be a string", path=path)
    unknown = sorted(set(data) - {"name", "version", "user", "system", "extract", "description"})
    if unknown:
        raise InputError(f"unknown template key(s) {unknown}", path=path)
    if "${question}" not in data["user"] and "$question" not in data["user"]:
        raise InputError("the template's 'user' text must contain ${question}", path=path)
    t = Template(data["name"], data["version"], data["user"], data.get("system", ""), data.get("extract", "plain"),
                 data.get("description", ""), source)
    try:
        t.extractor()
    except InputError as e:
        raise InputError(f"template 'extract': {e}", path=path) from None
    return t
