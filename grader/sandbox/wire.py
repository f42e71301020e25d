"""The parent-child wire format: a JSON header and raw tensor bytes, never a pickle.

A frame is two little-endian lengths, a JSON header and a blob; the header describes each value as a tensor
(dtype, shape, byte range in the blob), an int, a dict of them, or by its type name only. The parent treats
every byte from a child as hostile: lengths, nesting, field types, value counts and byte ranges are all
bounded, and a frame that breaks any rule raises `WireError`, which the caller turns into a student's error.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import re
import struct

import torch

MAX_HEADER = 1 << 20  # 1 MiB of JSON
MAX_BLOB = 64 << 20  # 64 MiB of tensor bytes in one frame
MAX_VALUES = 256  # tensors and ints described by one frame
MAX_ITEMS = 128  # entries of any list or map in a header
MAX_STR = 4000  # characters of any string in a header
MAX_DIMS = 8
_LENGTHS = struct.Struct("<II")
PREFIX_SIZE = _LENGTHS.size

DTYPES = {
    str(dt).removeprefix("torch."): dt
    for dt in (
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
    )
}
_ITEMSIZE = {name: torch.empty((), dtype=dt).element_size() for name, dt in DTYPES.items()}


class WireError(ValueError):
    """A frame from a child that does not follow the wire format."""


def _type_name(value) -> str:
    cls = type(value)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", "?")
    return name if module == "builtins" else f"{module}.{name}"


# torch's own tensor methods, taken from the C type, which no code can change: a sandbox child reads its inputs'
# bytes through these after student code ran, so replacing torch.Tensor.numpy cannot make a changed input look
# unchanged. (torch.Tensor is a Python class whose methods anyone can replace.)
_BASE = torch._C.TensorBase
_DEVICE, _DTYPE, _SHAPE = _BASE.device.__get__, _BASE.dtype.__get__, _BASE.shape.__get__


def tensor_bytes(t: torch.Tensor):
    """Return a tensor's bytes as a buffer, without a copy when the tensor is contiguous on the CPU."""
    t = _BASE.detach(t)
    if _BASE.is_neg(t) or _BASE.is_conj(t):  # a lazy negation or conjugation: the raw storage is not the values
        t = _BASE.resolve_conj(_BASE.resolve_neg(t))
    if _DEVICE(t).type != "cpu" or not _BASE.is_contiguous(t):
        t = _BASE.contiguous(_BASE.to(t, "cpu"))
    if _BASE.numel(t) == 0:
        return b""
    try:
        return memoryview(_BASE.numpy(t)).cast("B")
    except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16)
        return ctypes.string_at(_BASE.data_ptr(t), _BASE.numel(t) * _BASE.element_size(t))


class Unreadable:
    """A returned value the child cannot send as tensor bytes, sent as what it is ("Returned a ...")."""

    def __init__(self, description: str):
        self.description = description[:200]


def unreadable(t: torch.Tensor) -> str:
    """Describe a tensor whose values cannot be read as plain bytes, for "Returned a ..." messages."""
    try:
        if t.is_meta:
            return "tensor on the meta device, which has a shape but no values"
        if t.is_nested:
            return "nested tensor, which has no single shape"
        return f"{str(t.layout).removeprefix('torch.')} tensor on {t.device.type} whose values cannot be read"
    except Exception:  # noqa: BLE001 - a tensor too broken to describe
        return "tensor whose values cannot be read"


def digest(t: torch.Tensor) -> str:
    """Return a digest of a tensor's dtype, shape and bytes (for checking inputs after a call)."""
    h = hashlib.sha256(f"{_DTYPE(t)}|{tuple(_SHAPE(t))}|".encode())  # twice blake2b's speed (SHA extensions)
    h.update(tensor_bytes(t))
    return h.hexdigest()[:32]


class Encoder:
    """Turn values into a JSON-able description plus the tensor bytes, kept as zero-copy views where possible."""

    def __init__(self, align: int = 1):
        self.parts: list = []
        self.size = 0
        self.align = align  # each tensor's offset a multiple of this (inputs that a child maps in place: 64)

    def value(self, v, depth: int = 0) -> dict:
        """Describe one value; tensors keep their bytes, a dict of tensors recurses one level."""
        if isinstance(v, torch.Tensor):
            data = tensor_bytes(v)
            pad = -self.size % self.align
            if pad:
                self.parts.append(bytes(pad))
                self.size += pad
            desc = {
                "kind": "tensor",
                "dtype": str(v.dtype).removeprefix("torch."),
                "shape": list(v.shape),
                "offset": self.size,
                "nbytes": len(data),
                "requires_grad": bool(v.requires_grad),
                "grad_fn": v.grad_fn is not None,
            }
            self.parts.append(data)
            self.size += len(data)
            return desc
        if isinstance(v, Unreadable):
            return {"kind": "other", "type": v.description}
        if isinstance(v, int) and not isinstance(v, bool):
            return {"kind": "int", "value": v}
        if isinstance(v, dict) and depth == 0:
            return {"kind": "dict", "items": {str(k): self.value(x, depth + 1) for k, x in v.items()}}
        return {"kind": "other", "type": _type_name(v)}

    def blob(self) -> bytes:
        """Return the concatenated tensor bytes."""
        return b"".join(self.parts)


def pack(header: dict, blob: bytes = b"") -> bytes:
    """Return one frame."""
    head = json.dumps(header).encode()
    return _LENGTHS.pack(len(head), len(blob)) + head + blob


def pack_parts(header: dict, parts: list) -> list:
    """Return one frame as a list of buffers: prefix and header, then each tensor's bytes uncopied."""
    head = json.dumps(header).encode()
    return [_LENGTHS.pack(len(head), sum(len(p) for p in parts)) + head, *parts]


def read_lengths(prefix: bytes) -> tuple[int, int]:
    """Parse and bound the two lengths at the start of a frame."""
    if len(prefix) != PREFIX_SIZE:
        raise WireError("truncated frame")
    nhead, nblob = _LENGTHS.unpack(prefix)
    if nhead > MAX_HEADER:
        raise WireError(f"header of {nhead} bytes exceeds {MAX_HEADER}")
    if nblob > MAX_BLOB:
        raise WireError(f"{nblob / 2**20:.0f} MiB of tensors, more than the {MAX_BLOB >> 20} MiB allowed")
    return nhead, nblob


def decode_header(head: bytes) -> dict:
    """Parse a frame's JSON header; any failure, deep nesting included, is a WireError."""
    try:
        header = json.loads(head)
    except (ValueError, RecursionError, MemoryError, UnicodeDecodeError) as exc:
        raise WireError(f"malformed header ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise WireError("header is not an object")
    if _SURROGATE.search(head):  # a lone surrogate (chr(0xDC80)) would break every UTF-8 file it reaches
        header = _without_surrogates(header)
    return header


_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")  # as a JSON escape, or as raw bytes


def _without_surrogates(value):
    """Return value with every lone surrogate in its strings (keys too) replaced by '?', without recursion."""
    root = [value]
    stack = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        v = holder[key]
        if isinstance(v, str):
            holder[key] = v.encode("utf-8", "replace").decode("utf-8")
        elif isinstance(v, list):
            stack.extend((v, i) for i in range(len(v)))
        elif isinstance(v, dict):
            clean = {k.encode("utf-8", "replace").decode("utf-8"): x for k, x in v.items()}
            holder[key] = clean
            stack.extend((clean, k) for k in clean)
    return root[0]


# ---------------------------------------------------------------------------------------------------------------
# strict shapes of headers


class Map:
    """A schema: an object whose keys are free strings and whose values all follow one schema."""

    def __init__(self, of):
        self.of = of


class Opt:
    """A schema: null, or the inner schema."""

    def __init__(self, of):
        self.of = of


VALUE = object()  # a schema: a value description (checked further by Decoder)


def check(obj, schema, where: str = "reply"):
    """Raise WireError unless obj follows schema exactly; an object's keys are all optional, none unknown."""
    problem = _problem(obj, schema)
    if problem is not None:
        raise WireError(f"{where}{problem}")


def _problem(obj, schema) -> str | None:
    """Return where and how obj breaks schema (': expected ...', '.key: ...'), or None; no work on success."""
    if schema is str:
        return None if type(obj) is str and len(obj) <= MAX_STR else ": expected a string"
    if schema is bool:
        return None if type(obj) is bool else ": expected a boolean"
    if schema is int:
        return None if type(obj) is int and abs(obj) < 2**53 else ": expected an integer"
    if schema is float:
        return None if type(obj) in (int, float) else ": expected a number"
    if schema is VALUE:
        return None if type(obj) is dict else ": a value description must be an object"
    if isinstance(schema, Opt):
        return None if obj is None else _problem(obj, schema.of)
    if isinstance(schema, list):
        if type(obj) is not list or len(obj) > MAX_ITEMS:
            return f": expected a list of at most {MAX_ITEMS} entries"
        for k, x in enumerate(obj):
            problem = _problem(x, schema[0])
            if problem is not None:
                return f"[{k}]{problem}"
        return None
    if isinstance(schema, Map):
        if type(obj) is not dict or len(obj) > MAX_ITEMS:
            return f": expected an object of at most {MAX_ITEMS} entries"
        for k, x in obj.items():
            problem = _problem(k, str) or _problem(x, schema.of)
            if problem is not None:
                return f".{str(k)[:40]}{problem}"
        return None
    if isinstance(schema, dict):
        if type(obj) is not dict:
            return ": expected an object"
        for k, x in obj.items():
            if k not in schema:
                return f": unexpected field {str(k)[:40]!r}"
            problem = _problem(x, schema[k])
            if problem is not None:
                return f".{k}{problem}"
        return None
    raise TypeError(f"unknown schema {schema!r}")  # a bug in a schema, not in a reply


ERROR = {
    "type": str,
    "message": str,
    "line": Opt(int),
    "code": Opt(str),
    "function": Opt(str),
    "memory": bool,
}


# ---------------------------------------------------------------------------------------------------------------
# values


class Opaque:
    """A returned value that is not a tensor; only its type name crosses the wire."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"Opaque({self.type_name})"


class Returned:
    """A tensor a child returned, with the autograd flags it carried."""

    def __init__(self, tensor: torch.Tensor, requires_grad: bool, grad_fn: bool):
        self.tensor = tensor
        self.requires_grad = requires_grad
        self.grad_fn = grad_fn


class Decoder:
    """Rebuild values from one frame's blob; each byte may back at most one tensor, and values are counted."""

    def __init__(self, blob):
        self.blob = blob
        self.used: list[tuple[int, int]] = []
        self.values = 0

    def value(self, desc, depth: int = 0):
        """Rebuild a described value: a Returned tensor, an int, a dict of them, or an Opaque type name."""
        self.values += 1
        if self.values > MAX_VALUES:
            raise WireError(f"more than {MAX_VALUES} values in one reply")
        if not isinstance(desc, dict):
            raise WireError("value description is not an object")
        kind = desc.get("kind")
        if kind == "tensor":
            return self._tensor(desc)
        if kind == "dict" and depth == 0:
            items = desc.get("items")
            check(items, Map(VALUE), "dict value")
            return {k: self.value(v, depth + 1) for k, v in items.items()}
        if kind == "int":
            value = desc.get("value")
            check(value, int, "int value")
            return value
        if kind == "other":
            name = desc.get("type", "?")
            check(name, str, "type name")
            return Opaque(name[:200])
        raise WireError(f"unknown value kind {str(kind)[:40]!r}")

    def _tensor(self, desc: dict):
        for key, value in desc.items():  # the same rules as check(desc, TENSOR), inline: this runs for every tensor
            kind = _TENSOR_FIELDS.get(key)
            if kind is None:
                raise WireError(f"tensor: unexpected field {str(key)[:40]!r}")
            if type(value) is not kind and not (kind is list and type(value) is list):
                raise WireError(f"tensor.{key}: expected {kind.__name__}")
        shape, offset, nbytes = desc.get("shape"), desc.get("offset"), desc.get("nbytes")
        if (
            type(shape) is not list
            or len(shape) > MAX_DIMS
            or any(type(s) is not int or s < 0 or s >= 2**40 for s in shape)
        ):
            raise WireError(f"bad tensor shape {str(shape)[:80]}")
        if type(offset) is not int or type(nbytes) is not int:
            raise WireError("tensor without its byte range")
        if offset < 0 or nbytes < 0 or offset + nbytes > len(self.blob):
            raise WireError("tensor bytes out of range")
        numel = 1
        for s in shape:
            numel *= s
        dtype_name = desc.get("dtype")
        if dtype_name not in DTYPES:
            return Opaque(f"torch.Tensor of dtype {str(dtype_name)[:40]}")
        if nbytes != numel * _ITEMSIZE[dtype_name]:
            raise WireError("tensor byte count does not match its shape")
        if nbytes:
            if any(offset < end and start < offset + nbytes for start, end in self.used):
                raise WireError("two tensors share the same bytes")
            self.used.append((offset, offset + nbytes))
        flat = _flat(self.blob, dtype_name, offset, nbytes)
        return Returned(flat.reshape(shape), bool(desc.get("requires_grad")), bool(desc.get("grad_fn")))


def own_value(desc: dict, buffer, alias: bool):
    """Rebuild a value the grader encoded itself (a child reading its request): no bounds, the bytes are ours.

    alias: tensors over buffer's own memory (the shared inputs, so the parent sees in-place changes), else copies.
    """
    kind = desc["kind"]
    if kind == "tensor":
        return _flat(buffer, desc["dtype"], desc["offset"], desc["nbytes"], alias).reshape(desc["shape"])
    if kind == "int":
        return desc["value"]
    if kind == "dict":
        return {k: own_value(v, buffer, alias) for k, v in desc["items"].items()}
    return Opaque(desc["type"])


def _flat(buffer, dtype_name: str, offset: int, nbytes: int, alias: bool = False) -> torch.Tensor:
    """Return nbytes of buffer from offset as a 1-D tensor: over buffer's own memory if alias, else over a copy."""
    dtype = DTYPES[dtype_name]
    if not nbytes:
        return torch.empty(0, dtype=dtype)
    if alias:
        return torch.frombuffer(buffer, dtype=dtype, count=nbytes // _ITEMSIZE[dtype_name], offset=offset)
    return torch.frombuffer(bytearray(buffer[offset : offset + nbytes]), dtype=dtype)


_TENSOR_FIELDS = {
    "kind": str,
    "dtype": str,
    "shape": list,
    "offset": int,
    "nbytes": int,
    "requires_grad": bool,
    "grad_fn": bool,
}
