"""Readable names for device kernels.

Kernel names are C++ signatures hundreds of characters long. The table keeps
the full name and adds a short one: the function name with its namespaces,
argument list and nested template arguments dropped, plus what we can tell
about generated kernels (Triton kernels from Inductor name their kind and the
ops they fused).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TRITON = re.compile(r"^triton_(?P<kind>poi|red|per|tem|for|spl|tma)_(?P<rest>.+?)(?:_\d+)?$")
TRITON_KINDS = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent reduction",
    "tem": "template",
    "for": "foreach",
    "spl": "split scan",
    "tma": "template",
}
_CPP_INDUCTOR = re.compile(r"^cpp_fused_(?P<rest>.+?)(?:_\d+)?$")
_GEMM_WORDS = ("gemm", "gemv", "cutlass", "cublas", "wgmma", "hgemm", "sgemm", "mma", "matmul")
_COMM_WORDS = (
    "nccl",
    "rccl",
    "allreduce",
    "all_reduce",
    "allgather",
    "reducescatter",
    "alltoall",
    "broadcast",
)


@dataclass(frozen=True)
class KernelName:
    """What a kernel name tells us."""

    short: str
    family: str
    fused_ops: tuple[str, ...] = ()


def _strip_templates(text: str, keep_depth: int = 1) -> str:
    """Drop template arguments nested deeper than ``keep_depth``."""
    out = []
    depth = 0
    for ch in text:
        if ch == "<":
            depth += 1
            if depth == keep_depth + 1:
                out.append("…")
            if depth > keep_depth:
                continue
        elif ch == ">":
            depth -= 1
            if depth >= keep_depth:
                continue
        elif depth > keep_depth:
            continue
        out.append(ch)
    return "".join(out)


def _drop_arguments(name: str) -> str:
    """Remove a trailing ``(...)`` parameter list, respecting nested brackets."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        ch = name[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return name[:i] if i > 0 else name
    return name


def _drop_namespaces(text: str) -> str:
    # "at::native::(anonymous namespace)::foo" -> "foo", keeping template args.
    text = text.replace("(anonymous namespace)::", "")
    return re.sub(r"\b[A-Za-z_][\w]*::", "", text)


def fused_ops_of(rest: str) -> tuple[str, ...]:
    """Ops named in an Inductor kernel name (``fused_gelu_mul`` → gelu, mul)."""
    rest = rest[len("fused_") :] if rest.startswith("fused_") else rest
    parts = [p for p in rest.split("_") if p and not p.isdigit()]
    return tuple(parts)


def describe_kernel(name: str, max_len: int = 80) -> KernelName:
    """Short name and family (gemm, triton kind, communication, ...) of a kernel."""
    m = _TRITON.match(name)
    if m:
        kind = TRITON_KINDS.get(m.group("kind"), "triton")
        return KernelName(short=name, family=f"triton {kind}", fused_ops=fused_ops_of(m.group("rest")))
    m = _CPP_INDUCTOR.match(name)
    if m:
        return KernelName(short=name, family="inductor cpp", fused_ops=fused_ops_of(m.group("rest")))

    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    text = _drop_arguments(text)
    text = _strip_templates(text, keep_depth=1)
    text = _drop_namespaces(text)
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > max_len:
        text = text[: max_len - 1] + "…"
    lower = name.lower()
    if any(w in lower for w in _COMM_WORDS):
        family = "communication"
    elif name.startswith("Memcpy") or "memcpy" in lower:
        family = "memcpy"
    elif name.startswith("Memset") or "memset" in lower:
        family = "memset"
    elif any(w in lower for w in _GEMM_WORDS):
        family = "gemm"
    elif "conv" in lower or "implicit_gemm" in lower or "winograd" in lower:
        family = "convolution"
    elif "elementwise" in lower:
        family = "elementwise"
    elif "reduce" in lower or "softmax" in lower or "norm" in lower:
        family = "reduction"
    else:
        family = "other"
    return KernelName(short=text or name[:max_len], family=family)
