"""The Overview's pictures, taken in headless Chromium from a finished run: ``assets/overview.png`` (the
README's) and ``assets/overview-annotated.png`` (numbered callouts drawn onto it for the docs page "How to
read your answer", ``docs/reading.md``, whose list follows the same numbers).

.venv/bin/python bench/pictures/overview.py --runs-dir runs --run demo-bbc-openings

Each callout is placed on the element it names, found on the page, so the numbers follow the layout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from PIL import Image, ImageDraw, ImageFont  # noqa: E402

from tests.pages.app_process import headless_chromium, start_app, stop_app  # noqa: E402

COLOUR = (214, 40, 118)
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
VERDICT = ".st-key-page-verdict"
Box = tuple[float, float, float, float]  # left, top, right, bottom


def _box(locator) -> Box:
    found = locator.first.bounding_box()
    if found is None:
        raise SystemExit(f"not on the page: {locator}")
    return found["x"], found["y"], found["x"] + found["width"], found["y"] + found["height"]


def _union(*boxes: Box) -> Box:
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _section(page, heading: str) -> Box:
    """The heading ``heading`` and the first table shown below it (a folded one has a box too)."""
    top = _box(page.locator(f"h3:has-text('{heading}')"))
    tables = page.locator("[data-testid='stDataFrame']")
    shown = [tables.nth(i) for i in range(tables.count()) if tables.nth(i).is_visible()]
    below = [b for b in map(_box, shown) if b[1] > top[1]]
    return _union(top, min(below, key=lambda b: b[1]))


def callouts(page) -> list[Box]:
    """The boxes of the callouts, in the order of ``docs/reading.md``'s numbered list."""
    verdict = page.locator(VERDICT)
    caption = page.locator("[data-testid='stCaptionContainer']")
    sentences = verdict.locator("[data-testid='stMarkdown']").filter(has_not=caption)
    next_step = sentences.filter(has_not_text="Cheapest")
    menu = page.locator("[data-testid='stSidebarNav']")
    return [
        _box(verdict.locator("[data-testid='stMarkdown']").filter(has=caption)),
        _box(verdict.locator("[data-testid='stAlert']")),
        _box(next_step),
        _box(sentences.filter(has_text="Cheapest")),
        _box(verdict.locator("[data-testid='stExpander']")),
        _section(page, "What the labels say"),
        _box(page.locator("[data-testid='stMarkdown']").filter(has_text=" texts · labels")),
        _section(page, "The label-free ranking"),
        _union(
            _box(menu.get_by_text("Help", exact=True)), _box(menu.locator("a").filter(has_text="Glossary"))
        ),
    ]


def annotate(picture: Image.Image, boxes: list[Box], height: int) -> Image.Image:
    """``picture`` cut to ``height`` pixels, each box outlined and numbered from 1 in a disc beside it."""
    shown = picture.crop((0, 0, picture.width, height)).convert("RGB")
    draw = ImageDraw.Draw(shown)
    font = ImageFont.truetype(FONT, 20)
    for number, (left, top, right, bottom) in enumerate(boxes, start=1):
        draw.rounded_rectangle((left - 6, top - 4, right + 6, bottom + 4), radius=8, outline=COLOUR, width=3)
        centre = (left - 26, top + 14) if left > 300 else (right + 26, top + (bottom - top) / 2)
        draw.ellipse((centre[0] - 16, centre[1] - 16, centre[0] + 16, centre[1] + 16), fill=COLOUR)
        draw.text(centre, str(number), fill="white", font=font, anchor="mm")
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs")
    parser.add_argument("--run", default="demo-bbc-openings")
    parser.add_argument("--out", type=Path, default=ROOT / "assets")
    args = parser.parse_args()
    proc, url = start_app(args.runs_dir.resolve())
    try:
        with headless_chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 2600})
            page.goto(f"{url}/?run={args.run}", wait_until="domcontentloaded", timeout=120_000)
            page.locator(f"{VERDICT} [data-testid='stAlert']").wait_for(timeout=120_000)
            page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=120_000)
            page.wait_for_function(
                "() => document.querySelector('[data-testid=\"stApp\"]').dataset.testScriptState === 'notRunning'",
                timeout=120_000,
            )
            # the page scrolls inside the app, so the tall window above holds the whole Overview; the
            # boxes are read again after the picture until the layout has stopped moving
            full = args.out / "overview-full.png"
            boxes, before = callouts(page), None
            while boxes != before:
                page.wait_for_timeout(1500)
                page.screenshot(path=str(full), full_page=True)
                before, boxes = boxes, callouts(page)
    finally:
        stop_app(proc)
    picture = Image.open(full)
    full.unlink()
    height = int(max(b[3] for b in boxes)) + 30
    picture.crop((0, 0, picture.width, height)).save(args.out / "overview.png", optimize=True)
    annotate(picture, boxes, height).save(args.out / "overview-annotated.png", optimize=True)
    print(
        f"{args.out / 'overview.png'} and overview-annotated.png: {picture.width} × {height} px, {len(boxes)} callouts"
    )


if __name__ == "__main__":
    main()
