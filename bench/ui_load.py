"""The web UI's load: first-page bytes and render time, and a 5,000-step trace's first render and scrolling.

    .venv/bin/python bench/ui_load.py [--steps 5000] [--repeat 3]

A real `stash-rm up` (PostgreSQL for ingest, the gateway and the labeler), Debian's chromium driven by
Playwright (`STASH_CHROMIUM`, default /usr/bin/chromium), a fresh browser context per try (nothing cached).
"First page" is the traces list right after sign-in: the HTML shell, its ES modules and CSS, and the API
calls it makes, as the browser's resource timing counts them (transferred bytes: headers and bodies).
"First render" is from navigation start to the mark the trace view sets once its first rows are in the
DOM (`stash:trace-rendered`); "drawing" is the part of it after the trace's JSON arrived. Scrolling
moves the step list 600 px per frame through the trace and reports the frame times. Each figure is the
median over the tries. Needs PostgreSQL like the tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, sync_playwright
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from otlp_load import database, stash_stack  # noqa: E402

from support.browser import CHROMIUM, VIEWPORT  # noqa: E402
from support.long_trace import long_trace_line  # noqa: E402

SCROLL_FRAMES = 240
TRANSFERS = """() => {
    const entries = [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")];
    return entries.map((entry) => (
        { name: entry.name, bytes: entry.transferSize, ms: entry.duration, end: entry.responseEnd }
    ));
}"""
SCROLL = """async (frames) => {
    const scroller = document.getElementById("steps");
    const times = [];
    let last = performance.now();
    for (let frame = 0; frame < frames; frame += 1) {
        scroller.scrollTop += 600;
        await new Promise((resolve) => requestAnimationFrame(resolve));
        const now = performance.now();
        times.push(now - last);
        last = now;
    }
    return { times, rows: document.querySelectorAll("article.step").length, top: scroller.scrollTop };
}"""


def signed_in_page(browser: Browser, url: str, key: str) -> Any:
    """A fresh context (empty cache) holding a session cookie."""
    context = browser.new_context(base_url=url, viewport=VIEWPORT)
    response = context.request.post("/ui/session", data={"key": key})
    assert response.ok, response.text()
    return context, context.new_page()


def first_page(browser: Browser, url: str, key: str) -> dict[str, float]:
    context, page = signed_in_page(browser, url, key)
    page.goto("/traces")
    page.wait_for_selector("#trace-table")
    rendered_ms = page.evaluate("performance.now()")
    transfers = page.evaluate(TRANSFERS)
    context.close()
    api = sum(item["bytes"] for item in transfers if "/api/v1/rm/" in item["name"] or "/ui/session" in item["name"])
    total = sum(item["bytes"] for item in transfers)
    return {
        "shell bytes": total - api,
        "API bytes": api,
        "total bytes": total,
        "requests": len(transfers),
        "ms": rendered_ms,
    }


def long_trace(browser: Browser, url: str, key: str, trace_id: str) -> dict[str, float]:
    context, page = signed_in_page(browser, url, key)
    page.goto(f"/traces/{trace_id}")
    page.wait_for_selector("#step-1")
    rendered_ms = page.evaluate("performance.getEntriesByName('stash:trace-rendered')[0].startTime")
    detail = next(item for item in page.evaluate(TRANSFERS) if item["name"].endswith(f"/api/v1/rm/traces/{trace_id}"))
    scrolled = page.evaluate(SCROLL, SCROLL_FRAMES)
    context.close()
    frames = sorted(scrolled["times"])
    return {
        "first render ms": rendered_ms,
        "detail bytes": detail["bytes"],
        "detail ms": detail["ms"],
        "drawing ms (after the data)": rendered_ms - detail["end"],
        "rows in DOM": scrolled["rows"],
        "frame mean ms": statistics.fmean(frames),
        "frame p95 ms": frames[int(len(frames) * 0.95) - 1],
    }


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {name: statistics.median(run[name] for run in runs) for name in runs[0]}


def table(title: str, figures: dict[str, float]) -> Table:
    shown = Table(title=title)
    shown.add_column("measure")
    shown.add_column("median", justify="right")
    for name, value in figures.items():
        shown.add_row(
            name, f"{value:,.0f}" if "bytes" in name or name in ("requests", "rows in DOM") else f"{value:,.1f}"
        )
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    console = Console()
    with database() as url, stash_stack(url) as stack, sync_playwright() as playwright:
        with httpx.Client(
            base_url=f"{stack.gateway_url}/api/v1/rm", headers={"Authorization": f"Bearer {stack.key}"}, timeout=300
        ) as api:
            imported = api.post("/traces/import", json={"format": "stash", "data": long_trace_line(args.steps)})
            imported.raise_for_status()
        trace_id = imported.json()["trace_ids"][0]
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        lists = [first_page(browser, stack.gateway_url, stack.key) for _ in range(args.repeat)]
        traces = [long_trace(browser, stack.gateway_url, stack.key, trace_id) for _ in range(args.repeat)]
        browser.close()
    console.print(table("First page: the traces list after sign-in (cold cache)", medians(lists)))
    console.print(table(f"A {args.steps}-step trace: first render and scrolling", medians(traces)))


if __name__ == "__main__":
    main()
