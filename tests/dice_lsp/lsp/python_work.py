"""How much Python a call runs, counted rather than timed: the number of Python lines it
executes (sys.settrace's "line" events). A loop in Python over a file's lines or a line's
characters shows as a count that grows with them; work done in C (str methods, slicing,
encoding) does not. Unlike a clock, the count does not depend on what else the machine runs."""

from __future__ import annotations

import sys
from typing import Callable


def python_lines(call: Callable[[], object]) -> int:
    """The Python lines executed by call()."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(previous)
    return count
