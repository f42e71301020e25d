"""The child-to-parent wire format: a JSON header and raw tensor bytes, never a pickle.

The parent trusts nothing a sandboxed child sends. A frame is two little-endian lengths, a JSON header and a
blob; the header describes each value as a tensor (dtype, shape, byte range in the blob) or by its type name.
"""

from __future__ import annotations

import ctypes
import json
import struct

import torch

MAX_HEADER = 1 << 20  # 1 MiB of JSON
MAX_BLOB = 256 << 20  # 256 MiB of tensor bytes
_LENGTHS = struct.Struct("<II")

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


class WireError(ValueError):
    """A frame from a child that does not follow the wire format."""


def _type_name(value) -> str:
    cls = type(value)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", "?")
    return name if module == "builtins" else f"{module}.{name}"


class Encoder:
    """Turn returned values into a JSON-able description plus one blob of tensor bytes."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.size = 0

    def value(self, v, depth: int = 0) -> dict:
        """Describe one value; tensors keep their bytes, dicts of tensors recurse one level."""
        if isinstance(v, torch.Tensor):
            t = v.detach().to("cpu").clone().contiguous()
            data = ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""
            desc = {
                "kind": "tensor",
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "offset": self.size,
                "nbytes": len(data),
                "requires_grad": bool(v.requires_grad),
                "grad_fn": v.grad_fn is not None,
            }
            self.parts.append(data)
            self.size += len(data)
            return desc
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


def read_lengths(prefix: bytes) -> tuple[int, int]:
    """Parse and bound the two lengths at the start of a frame."""
    nhead, nblob = _LENGTHS.unpack(prefix)
    if nhead > MAX_HEADER:
        raise WireError(f"header of {nhead} bytes exceeds {MAX_HEADER}")
    if nblob > MAX_BLOB:
        raise WireError(f"returned {nblob / 2**20:.0f} MiB of tensors, more than the {MAX_BLOB >> 20} MiB allowed")
    return nhead, nblob


PREFIX_SIZE = _LENGTHS.size


def decode_header(head: bytes) -> dict:
    """Parse a frame's JSON header."""
    try:
        header = json.loads(head)
    except ValueError as exc:
        raise WireError(f"malformed header: {exc}") from None
    if not isinstance(header, dict):
        raise WireError("header is not an object")
    return header


def decode_value(desc, blob: bytes):
    """Rebuild a described value: a tensor, a dict of them, or an `Opaque` type name."""
    if not isinstance(desc, dict):
        raise WireError("value description is not an object")
    kind = desc.get("kind")
    if kind == "tensor":
        dtype = DTYPES.get(desc.get("dtype"))
        shape, offset, nbytes = desc.get("shape"), desc.get("offset"), desc.get("nbytes")
        if dtype is None:
            return Opaque(f"torch.Tensor of dtype {desc.get('dtype')}")
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape) and len(shape) <= 8):
            raise WireError(f"bad tensor shape {shape!r}")
        numel = 1
        for s in shape:
            numel *= s
        itemsize = torch.empty((), dtype=dtype).element_size()
        if not (isinstance(offset, int) and isinstance(nbytes, int)) or nbytes != numel * itemsize:
            raise WireError("tensor byte count does not match its shape")
        if offset < 0 or offset + nbytes > len(blob):
            raise WireError("tensor bytes out of range")
        flat = (
            torch.frombuffer(bytearray(blob[offset : offset + nbytes]), dtype=dtype)
            if nbytes
            else torch.empty(0, dtype=dtype)
        )
        t = flat.reshape(shape)
        return Returned(t, bool(desc.get("requires_grad")), bool(desc.get("grad_fn")))
    if kind == "dict":
        items = desc.get("items")
        if not isinstance(items, dict):
            raise WireError("dict without items")
        return {str(k): decode_value(v, blob) for k, v in items.items()}
    if kind == "int":
        value = desc.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            raise WireError("int without an integer value")
        return value
    if kind == "other":
        return Opaque(str(desc.get("type", "?"))[:200])
    raise WireError(f"unknown value kind {kind!r}")


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
