"""Lines: raw log bytes become normalised `Line`s (ANSI stripped, \\r updates split, prefixes parsed)."""

from bootwatch.lines.line import Line
from bootwatch.lines.normalize import Normalizer

__all__ = ["Line", "Normalizer"]
