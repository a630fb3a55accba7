"""The timeline's colours: one per category of work (`analysis.categories`), and device idle.

A colour says what kind of work a block is (GEMM, copy, host op ...), the
same in every trace, and the legend names it; names no longer hash to
colours, so two unrelated kernels never share a GEMM's colour by chance.
Hues are picked so that neighbours in the legend differ, light enough for
the dark label text and saturated enough to read on a dark page.
"""

from __future__ import annotations

from ..analysis import categories as C

#: RGB (0-255) of each category.
CATEGORY_RGB: dict[str, tuple[int, int, int]] = {
    C.GEMM: (66, 133, 244),
    C.ATTENTION: (171, 71, 188),
    C.CONV: (0, 172, 193),
    C.NORM: (255, 167, 38),
    C.REDUCTION: (239, 83, 80),
    C.ELEMENTWISE: (102, 187, 106),
    C.TRITON: (255, 112, 67),
    C.OTHER_KERNEL: (141, 110, 99),
    C.COMMUNICATION: (236, 64, 122),
    C.MEMCPY: (255, 213, 79),
    C.MEMSET: (174, 213, 129),
    C.HOST_OP: (144, 164, 174),
    C.USER_RANGE: (126, 87, 194),
    C.PYTHON: (188, 170, 164),
    C.RUNTIME: (207, 186, 150),
}
#: Alpha of merged glyphs by density level (share of the glyph that is busy).
MERGED_ALPHA = (0.85, 0.6, 0.4)
#: Device idle shading: a light grey that reads on light and dark pages.
IDLE_COLOUR = "rgba(150,150,150,0.28)"
IDLE_LABEL = "device idle"


def _css(rgb: tuple[int, int, int], alpha: float = 1.0) -> str:
    r, g, b = rgb
    return f"rgba({r},{g},{b},{alpha})"


#: Base colours, indexed by `analysis.categories.CATEGORY_INDEX`.
BASE = [_css(CATEGORY_RGB[c]) for c in C.CATEGORIES]
#: Palette indexed by ``category + len(CATEGORIES) * level`` (level 0 = a
#: single event, 1..3 = merged glyphs from dense to sparse).
PALETTE: list[str] = BASE + [_css(CATEGORY_RGB[c], a) for a in MERGED_ALPHA for c in C.CATEGORIES]
