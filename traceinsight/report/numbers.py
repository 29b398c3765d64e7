"""One rounding rule for numbers in the document: finite floats rounded, NaN and inf as None."""
from __future__ import annotations

import math


def num(x, nd: int = 3):
    if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))):
        return None
    return round(float(x), nd)
