"""A workflow checkpoint's values as plain JSON, and back — never a pickle.

The framework's own checkpoint encoding keeps JSON values as they are
(``None``, booleans, numbers, strings, plain dicts and lists) and pickles
everything else. This codec keeps the same JSON values as they are and maps
the framework's own types onto JSON through the framework's own
serialization instead of pickle:

* a ``WorkflowMessage`` (what an executor sent and another has yet to
  receive) through its ``to_dict`` / ``from_dict``;
* a pending ``request_info`` ``WorkflowEvent`` likewise (its request and
  response types by name, resolved as the framework resolves them: only
  among types already imported, or those given as ``allowed_types``);
* an Agent Framework object (``Message``, ``Content``, ``AgentResponse`` …,
  any ``SerializationMixin`` of the ``agent_framework`` package) through its
  ``to_dict`` / ``from_dict``, revived only from modules already imported;
* a dataclass of the ``agent_framework`` package (what one ``AgentExecutor``
  sends the next: ``AgentExecutorRequest``/``AgentExecutorResponse``) as its
  constructor's fields, revived only from modules already imported;
* a pydantic model whose class is in ``allowed_types``, through
  ``model_dump(mode="json")`` / ``model_validate``.

Anything else — a tuple, a set, a dataclass, a datetime, an enum, a dict
with keys that are not strings, NaN, a lone surrogate — is refused before
anything is written: ``NotJSONCompatible`` naming where the value sits
(``state.orders[3]``) and its type, never the value.

Typed values are wrapped as ``{"$af": kind, …}``. A dict of the user's that
has a key ``$af`` or ``$log`` (the markers this adapter reads) is wrapped as
``{"$af": "dict", "v": …}``, so data shaped like a marker stays data.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from agent_framework import WorkflowEvent
from agent_framework._serialization import SerializationMixin
from agent_framework._workflows._runner_context import WorkflowMessage
from agent_framework.exceptions import WorkflowCheckpointException
from pydantic import BaseModel

from safepoint import CorruptCheckpoint, NotJSONCompatible

TYPED = "$af"  # the key of a typed value's wrapper
LOG = "$log"  # the key of a list stored in the message log (layout.py)
MARKERS = frozenset({TYPED, LOG})
_FRAMEWORK = "agent_framework"
_T = TypeVar("_T")


def type_key(cls: type[Any]) -> str:
    """``module:qualname``, the framework's own spelling of a type in its checkpoints."""
    return f"{cls.__module__}:{cls.__qualname__}"


class Codec:
    """Encodes checkpoint values to JSON trees and decodes them, refusing what would need pickle."""

    def __init__(self, allowed_types: Iterable[type[Any]] = ()) -> None:
        self.models: dict[str, type[BaseModel]] = {}
        self.event_types: dict[str, type[Any]] = {}
        for cls in allowed_types:
            self.event_types[f"{cls.__module__}.{cls.__qualname__}"] = cls  # the framework's spelling
            if isinstance(cls, type) and issubclass(cls, BaseModel):
                self.models[type_key(cls)] = cls

    # -- encoding -------------------------------------------------------------------------

    def encode(self, value: Any, path: str) -> Any:
        """``value`` as a JSON tree; ``NotJSONCompatible`` names ``path`` for what cannot be."""
        kind = type(value)
        if value is None or kind is bool or kind is int:
            return value
        if kind is str:
            return _checked_text(value, path)
        if kind is float:
            if not math.isfinite(value):
                raise NotJSONCompatible(path, "a float that is NaN or infinite (JSON has neither)")
            return value
        if kind is dict:
            return self._encode_dict(value, path)
        if kind is list:
            return [self.encode(item, f"{path}[{i}]") for i, item in enumerate(value)]
        if isinstance(value, WorkflowMessage):
            return {TYPED: "message", "v": self.encode(value.to_dict(), path)}
        if isinstance(value, WorkflowEvent):
            if value.type != "request_info":
                raise NotJSONCompatible(
                    path, f"a {value.type!r} WorkflowEvent (only request_info events are kept)"
                )
            return {TYPED: "event", "v": self.encode(value.to_dict(), path)}
        if isinstance(value, SerializationMixin) and kind.__module__.startswith(_FRAMEWORK):
            return {TYPED: "object", "type": type_key(kind), "v": self.encode(value.to_dict(), path)}
        if dataclasses.is_dataclass(value) and kind.__module__.startswith(_FRAMEWORK):
            # What one AgentExecutor sends the next (AgentExecutorRequest/Response): its fields.
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
            return {TYPED: "record", "type": type_key(kind), "v": self.encode(fields, path)}
        if isinstance(value, BaseModel) and type_key(kind) in self.models:
            return {
                TYPED: "model",
                "type": type_key(kind),
                "v": self.encode(value.model_dump(mode="json"), path),
            }
        raise NotJSONCompatible(
            path,
            f"a {kind.__module__}.{kind.__qualname__} value: the framework would pickle it, and safepoint "
            "stores no pickle (use JSON values, Agent Framework objects, or pydantic models given as "
            "allowed_types)",
        )

    def _encode_dict(self, value: dict[Any, Any], path: str) -> Any:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotJSONCompatible(
                    path, f"a dict key of type {type(key).__name__} (JSON keys are strings)"
                )
            out[_checked_text(key, path)] = self.encode(item, f"{path}.{key}" if path else key)
        return {TYPED: "dict", "v": out} if not MARKERS.isdisjoint(out) else out

    # -- decoding -------------------------------------------------------------------------

    def decode(self, tree: Any, where: tuple[str, int]) -> Any:
        """The Python value of a JSON tree ``encode`` made (fresh objects each call)."""
        if isinstance(tree, list):
            return [self.decode(item, where) for item in tree]
        if not isinstance(tree, Mapping):
            return tree
        kind = tree.get(TYPED)
        if kind is None:
            return {key: self.decode(item, where) for key, item in tree.items()}
        body = tree.get("v")
        if kind == "dict" and isinstance(body, Mapping):
            return {key: self.decode(item, where) for key, item in body.items()}
        if kind == "message" and isinstance(body, Mapping):
            return revive(lambda: WorkflowMessage.from_dict(self.decode(body, where)), where)
        if kind == "event" and isinstance(body, Mapping):
            return revive(
                lambda: WorkflowEvent.from_dict(self.decode(body, where), allowed_types=self.event_types),
                where,
            )
        if kind == "object" and isinstance(body, Mapping):
            cls = _imported_class(str(tree.get("type")), where)
            if not issubclass(cls, SerializationMixin) or not cls.__module__.startswith(_FRAMEWORK):
                raise CorruptCheckpoint(
                    *where, detail=f"stored type {tree.get('type')!r} is not an Agent Framework type"
                )
            return revive(lambda: cls.from_dict(self.decode(body, where)), where)
        if kind == "record" and isinstance(body, Mapping):
            record = _imported_class(str(tree.get("type")), where)
            if not dataclasses.is_dataclass(record) or not record.__module__.startswith(_FRAMEWORK):
                raise CorruptCheckpoint(
                    *where, detail=f"stored type {tree.get('type')!r} is not an Agent Framework record"
                )
            return revive(lambda: record(**self.decode(body, where)), where)
        if kind == "model" and isinstance(body, Mapping):
            model = self.models.get(str(tree.get("type")))
            if model is None:
                raise CorruptCheckpoint(
                    *where, detail=f"stored model {tree.get('type')!r} is not in allowed_types"
                )
            return revive(lambda: model.model_validate(self.decode(body, where)), where)
        raise CorruptCheckpoint(*where, detail=f"unknown typed value {kind!r}")


def _checked_text(text: str, path: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise NotJSONCompatible(path, "a string with a lone surrogate (not storable as UTF-8)") from None
    return text


def _imported_class(key: str, where: tuple[str, int]) -> type[Any]:
    """The class ``module:qualname`` names, from an already imported module: nothing is imported."""
    module_name, _, qualname = key.partition(":")
    target: Any = sys.modules.get(module_name)
    for part in qualname.split(".") if target is not None else ():
        target = getattr(target, part, None)
    if not isinstance(target, type):
        raise CorruptCheckpoint(*where, detail=f"stored type {key!r} is not an imported class")
    return target


# What the framework's ``from_dict`` (and plain reads of a stored tree) raise on data of the
# wrong shape: a missing key, a wrong type, a bad number or index, an unknown name.
# (The framework wraps some as its own exception, whose text quotes the stored name.)
MALFORMED = (
    KeyError,
    TypeError,
    ValueError,
    IndexError,
    ModuleNotFoundError,
    AttributeError,
    WorkflowCheckpointException,
)


def revive(make: Callable[[], _T], where: tuple[str, int]) -> _T:
    """``make()``, with a stored value of the wrong shape as ``CorruptCheckpoint`` naming run and step."""
    try:
        return make()
    except MALFORMED as exc:
        raise CorruptCheckpoint(
            *where, detail=f"a stored value does not revive ({type(exc).__name__})"
        ) from None
