"""The site's CJK webfont: Noto Sans CJK SC from Debian's fonts-noto-cjk, cut down to the characters the pages use.

The Simplified Chinese face of the collection draws Simplified glyph forms, and full-width curly quotes and dashes
where a Latin font draws narrow ones. Each built edition gets its own subset, in _static/fonts/, regular and bold;
site.css declares them for the CJK ranges only (CJK_RANGES, its unicode-range).
"""

from __future__ import annotations

import re
from pathlib import Path

from fontTools import subset as ftsubset
from fontTools.ttLib import TTCollection

FONT_FOLDERS = [Path("/usr/share/fonts/opentype/noto"), Path("/usr/share/fonts/noto-cjk")]
FILES = {"regular": "NotoSansCJK-Regular.ttc", "bold": "NotoSansCJK-Bold.ttc"}
FACE = "Noto Sans CJK SC"
# Han, CJK punctuation, full-width forms, and the curly quotes, dash and ellipsis that Chinese sets full width.
CJK = re.compile("[\u2014\u2018\u2019\u201c\u201d\u2026\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def font_source() -> dict[str, tuple[Path, int]]:
    """Each weight's font collection and the index of its Simplified Chinese face; SystemExit saying how to get it."""
    found = {}
    for weight, name in FILES.items():
        path = next((folder / name for folder in FONT_FOLDERS if (folder / name).is_file()), None)
        if path is None:
            raise SystemExit(
                f"make site needs {name} (Debian's fonts-noto-cjk) for the Chinese pages' webfont: "
                "apt-get install fonts-noto-cjk (make site does it when run as root)"
            )
        faces = [font["name"].getDebugName(1) for font in TTCollection(str(path), lazy=True).fonts]
        found[weight] = (path, faces.index(FACE))
    return found


def characters(html: Path) -> str:
    """Every CJK character of the built pages in `html`, and of the search's messages, sorted."""
    files = [*html.rglob("*.html"), *html.glob("_static/translations.js")]
    return "".join(sorted({c for f in files for c in CJK.findall(f.read_text(encoding="utf-8"))}))


def subset(source: dict[str, tuple[Path, int]], html: Path) -> None:
    """Write _static/fonts/cjk-<weight>.woff2 into the built edition `html`: the faces of `source`, cut down."""
    text = characters(html)
    (html / "_static" / "fonts").mkdir(parents=True, exist_ok=True)
    options = ftsubset.Options(flavor="woff2", desubroutinize=True, hinting=False, font_number=0)
    for weight, (path, index) in source.items():
        options.font_number = index
        font = ftsubset.load_font(str(path), options)
        subsetter = ftsubset.Subsetter(options)
        subsetter.populate(text=text)
        subsetter.subset(font)
        ftsubset.save_font(font, str(html / "_static" / "fonts" / f"cjk-{weight}.woff2"), options)
