"""Option records: the settings of a command, grouped, typed, with one flat keyword spelling.

A command's settings (``vdr.evaluate``'s, say) are a frozen dataclass whose fields are GROUPS, each
group a frozen dataclass of its own (:class:`Grouped`)::

    @dataclass(frozen=True)
    class Inputs:
        queries: str | None = None

    @dataclass(frozen=True, init=False)
    class Options(Grouped):
        inputs: Inputs = field(default_factory=Inputs)

Every setting keeps ONE flat name, unique across the groups, so that callers need not know the
grouping: ``Options(queries="q.jsonl")``, ``opts.queries``, ``opts.replace(queries=...)`` and
``Options.of(**keywords)`` all read and write the group that holds it, and an unknown keyword is a
:class:`TypeError` naming the known ones. ``Options(inputs=Inputs(...), queries=...)`` starts from
the given group and overrides it with the flat keywords. :func:`keyword_signature` turns the flat
fields into the ``inspect.Signature`` of a ``**options`` function (``help()`` lists every setting
with its default, typer reads it).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

__all__ = ["Grouped", "keyword_signature", "with_keywords"]


class Grouped:
    """Base of an option record whose dataclass fields are groups (see the module docstring).

    Subclasses are ``@dataclass(frozen=True, init=False)``; every field has a ``default_factory``
    that builds the group's default (a frozen dataclass).

    Raises:
        TypeError: (at class creation) two groups share a setting name, or a setting is named like
            a group; (at construction) an unknown keyword, named with the known ones.
    """

    def __init__(self, **keywords: Any) -> None:
        """Groups given by their group name, settings by their flat name (flat names win)."""
        flat = self.flat_fields()
        groups = {f.name: f for f in dataclasses.fields(self)}
        unknown = sorted(set(keywords) - set(flat) - set(groups))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unknown option(s) {', '.join(map(repr, unknown))}; "
                            f"known: {', '.join(flat)}")
        for name, f in groups.items():
            base = keywords[name] if name in keywords else f.default_factory()
            changes = {n: v for n, v in keywords.items() if flat.get(n) == name}
            object.__setattr__(self, name, dataclasses.replace(base, **changes) if changes else base)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._FLAT = None

    @classmethod
    def flat_fields(cls) -> dict[str, str]:
        """``{setting name: group name}`` in declaration order (groups in order, then their fields)."""
        if cls.__dict__.get("_FLAT") is None:
            out: dict[str, str] = {}
            groups = [f for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
            for g in groups:
                for f in dataclasses.fields(g.default_factory()):
                    if f.name in out or f.name in {x.name for x in groups}:
                        raise TypeError(f"{cls.__name__}: setting {f.name!r} of group {g.name!r} is named twice")
                    out[f.name] = g.name
            cls._FLAT = out
        return cls._FLAT  # type: ignore[return-value]

    @classmethod
    def setting_fields(cls) -> list[dataclasses.Field]:
        """The dataclass fields of every setting, in :meth:`flat_fields` order."""
        return [f for g in dataclasses.fields(cls) for f in dataclasses.fields(g.default_factory())]  # type: ignore[arg-type]

    @classmethod
    def of(cls, options: "Grouped | None" = None, **keywords: Any):
        """``options`` (default: all defaults) with ``keywords`` (flat names or groups) replaced.

        Raises:
            TypeError: a keyword that is no setting or group (named, with the known ones).
        """
        if options is None:
            return cls(**keywords)
        return options.replace(**keywords)

    def replace(self, **keywords: Any):
        """A copy with ``keywords`` (flat names or groups) replaced (:func:`dataclasses.replace`)."""
        current = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return type(self)(**{**current, **keywords})

    def __getattr__(self, name: str) -> Any:
        """A setting by its flat name (``opts.queries`` is ``opts.inputs.queries``)."""
        flat = type(self).flat_fields()
        if name in flat:
            return getattr(object.__getattribute__(self, flat[name]), name)
        raise AttributeError(f"{type(self).__name__!r} has no setting {name!r}")

    def flat(self) -> dict[str, Any]:
        """``{setting name: value}`` of every setting."""
        return {n: getattr(getattr(self, g), n) for n, g in self.flat_fields().items()}


def keyword_signature(cls: type[Grouped], leading: list[inspect.Parameter], return_annotation: Any) -> inspect.Signature:
    """The signature ``(*leading, options=None, <every setting of cls as a keyword with its default>)``."""
    settings = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=f.type,
                                  default=f.default if f.default is not dataclasses.MISSING else f.default_factory())
                for f in cls.setting_fields()]
    options = inspect.Parameter("options", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=f"{cls.__name__} | None")
    return inspect.Signature([*leading, options, *settings], return_annotation=return_annotation)


def with_keywords(cls: type, options: Any, keywords: dict[str, Any], caller: str, extra_known: tuple[str, ...] = ()):
    """``options`` (default ``cls()``) with ``keywords`` replaced: THE rule by which every function of
    vdr that takes ``options=`` plus keywords (``evaluate``, ``compare``, ``metrics``, ``judge``,
    ``rewrite``, ``ingest``, ``ingest_vidore``) applies them.

    Args:
        cls: the option record (a dataclass, or a :class:`Grouped` record: flat names accepted).
        options: an instance of ``cls`` or ``None``.
        keywords: field names -> values.
        caller: the function's name, for the message (``"compare"``).
        extra_known: other keyword names the caller takes and removed from ``keywords`` before
            (listed in the message).

    Raises:
        TypeError: a keyword that is no field (named, with the known ones), as for any Python
            function called with an unknown keyword; ``options`` that is not a ``cls``.
    """
    known = list(cls.flat_fields()) + [f.name for f in dataclasses.fields(cls)] if issubclass(cls, Grouped) else \
        [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(keywords) - set(known))
    if unknown:
        shown = [n for n in known if not (issubclass(cls, Grouped) and n in {f.name for f in dataclasses.fields(cls)})]
        raise TypeError(f"{caller}() got unknown option(s) {', '.join(map(repr, unknown))}; "
                        f"known: {', '.join([*shown, *extra_known])}")
    if options is None:
        return cls(**keywords)
    if not isinstance(options, cls):
        raise TypeError(f"{caller}(): options must be {cls.__name__}, got {type(options).__name__}")
    if not keywords:
        return options
    return options.replace(**keywords) if isinstance(options, Grouped) else dataclasses.replace(options, **keywords)
