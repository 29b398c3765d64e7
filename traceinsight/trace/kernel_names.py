"""Kernel names for matching across two traces (see report/diff.py for the rule)."""
from __future__ import annotations

import re

# Collective kernels (NCCL / RCCL): trace/facts.is_collective, trace/peer_waits.
COLLECTIVE = r"nccl|rccl|AllReduce|AllGather|ReduceScatter|all_reduce|all_gather"

_ANON = re.compile(r"\(anonymous namespace\)::")
_LAMBDA = re.compile(r"\{[^{}]*\}")
_IDENT = re.compile(r"(?<![\w])[A-Za-z_]\w*(?:::[A-Za-z_~]\w*)*")
_PLAIN_TYPE = re.compile(
    r"^(?:void|bool|char|short|int|long|float|double|half|unsigned|signed|const|volatile|true|false|auto|"
    r"size_t|ptrdiff_t|u?int\d+_t|__half|__nv_bfloat16|__nv_fp8\w*|Half|BFloat16|Float8\w*|complex|"
    r"(?:u?char|u?short|u?int|u?long|longlong|float|double|half|bfloat16|__half|__nv_bfloat16)\d+)$")
_GENERIC = {
    "Array", "array", "detail", "TensorIteratorBase", "OffsetCalculator", "TrivialOffsetCalculator", "IntDivider",
    "LoadWithoutCast", "StoreWithoutCast", "LoadWithCast", "StoreWithCast", "policies", "unroll",
    "vectorized", "multi_outputs_unroll", "memory", "type", "operator", "lambda", "std", "tuple",
    "pair", "c10", "at", "native", "Scalar", "ScalarType", "integral_constant", "enable_if",
    "cudnnKernelDataType_t", "nullptr_t", "GenericPacked", "sizeof",
}
MAX_HINTS = 3


def _strip_parens(s: str) -> str:
    """Remove every balanced "(...)" (an unclosed one runs to the end, as in a truncated name)."""
    out, depth = [], 0
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _hints(template_text: str) -> list[str]:
    t = _strip_parens(template_text)
    prev = None
    while prev != t:   # nested lambdas: {lambda#1}::operator() const::{lambda#7}
        prev, t = t, _LAMBDA.sub(" ", t)
    out: list[str] = []
    for tok in _IDENT.findall(t):
        last = tok.split("::")[-1]
        if not last or _PLAIN_TYPE.match(last) or last in _GENERIC or last in out:
            continue
        out.append(last)
        if len(out) >= MAX_HINTS:
            break
    return out


def normalize_kernel(name: str, kind: str = "kernel") -> str:
    """The matching key of a GPU activity name (see the module docstring for the rule)."""
    name = " ".join(str(name).split())
    if kind != "kernel":
        return name
    s = _ANON.sub("", name)
    base: list[str] = []          # the name outside <> at depth 0, up to its argument list
    templates: list[tuple[int, str]] = []   # (position in base, template text) of top-level <...>
    depth, cur = 0, []
    i = 0
    while i < len(s):
        ch = s[i]
        if depth == 0:
            if ch == "<":
                # "operator<" / "operator<<" are part of a name, not a template.
                if "".join(base).endswith("operator"):
                    base.append(ch)
                else:
                    depth, cur = 1, []
            elif ch == "(":
                if "".join(base).endswith("operator"):
                    base.append("()")
                    i += 2 if s[i:i + 2] == "()" else 1
                    continue
                break      # the argument list: the rest is parameters
            else:
                base.append(ch)
        else:
            if ch == "<":
                depth += 1
            elif ch == ">":
                depth -= 1
                if depth == 0:
                    templates.append((len(base), "".join(cur)))
                    i += 1
                    continue
            cur.append(ch)
        i += 1
    if depth > 0:      # a name cut short inside its template arguments: drop a half identifier
        templates.append((len(base), re.sub(r"[\w:]+$", "", "".join(cur))))
    b = "".join(base).strip()
    # Drop a return type: "void x", "std::enable_if<...>::type internal::gemvx::kernel" -> the last word.
    cut = b.rfind(" ")
    start = cut + 1 if cut >= 0 else 0
    if cut >= 0:
        b = b[start:]
    hints: list[str] = []
    for pos, text in templates:
        if pos < start:
            continue
        for h in _hints(text):
            if h not in hints and len(hints) < MAX_HINTS:
                hints.append(h)
    b = b or name
    return f"{b}<{', '.join(hints)}>" if hints else b
