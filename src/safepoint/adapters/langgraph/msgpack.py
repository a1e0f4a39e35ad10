"""LangGraph's msgpack payloads as JSON trees, so the scrubber can read them.

LangGraph serializes what is not plain JSON (tuples, sets, datetimes, pydantic
models, LangChain messages …) to msgpack. Stored as base64, such a payload
would hide every string in it from safepoint's scrubber — an API key in a
graph's input would reach the store. So the payload is unpacked into a JSON
tree instead, strings in the clear, and packed again on load:

    msgpack map, str keys         {"key": tree, …}   (no key starting with "$")
    map with other keys           {"$map": [[key, value], …]}
    array                         [tree, …]
    bin (bytes)                   {"$bin": bytes}
    float NaN / ±inf              {"$float": "nan" | "inf" | "-inf"}
    ext (LangGraph's typed ones)  {"$ext": [code, tree of its own msgpack payload]}
    ext that is not msgpack       {"$extbin": [code, bytes]}

A string the scrubber redacts stays a string, so the value still loads, with
the marker in place of the secret. Binary parts stay ``bytes``: the store
scans them and, if anything in them is a secret, replaces them *whole* by a
``bytes`` placeholder — never an edit inside base64 that would no longer
decode. (Trees written before carry base64 text there; both are read.)
"""

from __future__ import annotations

import base64
import math
from typing import Any

import ormsgpack

from safepoint.refs import SecretRef

_UNPACK = ormsgpack.OPT_NON_STR_KEYS


class _Ext:
    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data


def to_tree(payload: bytes) -> Any:
    """The JSON tree of one msgpack document (``ValueError`` if it is not one)."""
    try:
        unpacked = ormsgpack.unpackb(payload, ext_hook=_Ext, option=_UNPACK)
    except (ormsgpack.MsgpackDecodeError, TypeError) as exc:
        raise ValueError("not a msgpack document") from exc
    return _tree(unpacked)


def from_tree(tree: Any) -> bytes:
    """The msgpack document ``to_tree`` read (``ValueError`` for a malformed tree)."""
    try:
        return ormsgpack.packb(_value(tree), option=ormsgpack.OPT_NON_STR_KEYS)
    except (ormsgpack.MsgpackEncodeError, TypeError, KeyError, IndexError) as exc:
        raise ValueError("not a msgpack tree") from exc


def _tree(value: Any) -> Any:
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if kind is list:
        return [_tree(v) for v in value]
    if kind is dict:
        if all(type(k) is str and not k.startswith("$") for k in value):
            return {k: _tree(v) for k, v in value.items()}
        return {"$map": [[_tree(k), _tree(v)] for k, v in value.items()]}
    if kind is bytes:
        return {"$bin": value}
    if kind is _Ext:
        try:
            return {"$ext": [value.code, to_tree(value.data)]}
        except ValueError:
            return {"$extbin": [value.code, value.data]}
    raise ValueError(f"msgpack produced an unexpected {kind.__name__}")


def _value(tree: Any) -> Any:
    kind = type(tree)
    if tree is None or kind in (bool, int, float, str):
        return tree
    if isinstance(tree, str):  # scrubbed text from a load: the text it shows
        return str(tree)
    if isinstance(tree, SecretRef):  # a string that was a secret, not resolved: its marker
        return f"[SECRET:{tree.name}]"
    if isinstance(tree, list):
        return [_value(v) for v in tree]
    if not isinstance(tree, dict):
        raise TypeError(kind.__name__)
    if len(tree) == 1:
        ((tag, body),) = tree.items()
        if tag == "$map":
            return {_hashable(_value(k)): _value(v) for k, v in body}
        if tag == "$bin":
            return _binary(body)
        if tag == "$float":
            return float(body)
        if tag == "$ext":
            return ormsgpack.Ext(int(body[0]), from_tree(body[1]))
        if tag == "$extbin":
            return ormsgpack.Ext(int(body[0]), _binary(body[1]))
    if any(k.startswith("$") for k in tree):
        raise KeyError("unknown $ tag")
    return {k: _value(v) for k, v in tree.items()}


def _binary(body: Any) -> bytes:
    """A binary part: bytes as stored now, or the base64 text of older trees."""
    if isinstance(body, bytes):
        return body
    return base64.b64decode(body, validate=True)


def _hashable(key: Any) -> Any:
    # A msgpack array used as a map key comes back as a list; a tuple packs the same.
    return tuple(_hashable(k) for k in key) if isinstance(key, list) else key
