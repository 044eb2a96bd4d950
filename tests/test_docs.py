"""The documentation's relative links resolve: every file they name exists and every #anchor is a heading there.

README.md is one screen that links to a page per subject in docs/; a reader must reach any capability
from it in two clicks (README → page → section), so a renamed heading or a moved page fails here
rather than leaving a dead link. Anchors are GitHub's: the heading's text in lower case, punctuation
dropped, spaces as hyphens, a repeated heading numbered `-1`, `-2` ….
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "charts" / "stash-rm" / "README.md"]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto: …


def prose(text: str) -> str:
    """The Markdown without fenced blocks and code spans, where brackets are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its visible text, lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page's headings make, with GitHub's numbering of repeated ones."""
    seen: dict[str, int] = {}
    result = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def shown(path: Path) -> Path:
    """A path as the failure message names it: relative to the repository when it is inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file is missing or whose #anchor is no heading of that file."""
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {shown(linked)}")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{target}: no heading makes #{anchor} in {shown(linked)}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = prose((ROOT / "README.md").read_text(encoding="utf-8"))
    readme_links = {target.partition("#")[0] for target in LINK.findall(readme)}
    unlinked = [page.name for page in sorted((ROOT / "docs").glob("*.md")) if f"docs/{page.name}" not in readme_links]
    assert unlinked == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Connecting an agent (OpenTelemetry)", "connecting-an-agent-opentelemetry"),
        ("Kubernetes Jobs (STASH_JOB_*)", "kubernetes-jobs-stash_job_"),
        ("Observability: /healthz, /metrics, logs", "observability-healthz-metrics-logs"),
        ("The web UI's session", "the-web-uis-session"),
        ("Running the stack (`stash-rm up`)", "running-the-stack-stash-rm-up"),
    ],
)
def test_anchors_are_the_ones_github_makes(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Notes\n\n```\n## not a heading\n```\n\n## Notes\n", encoding="utf-8")
    assert anchors(page) == {"title", "notes", "notes-1"}


def test_a_link_to_a_missing_heading_or_file_is_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Here\n\n[ok](#here) [gone](#there) [none](missing.md) `[code](#not-a-link)` [web](https://example.com)\n",
        encoding="utf-8",
    )
    assert [problem.split(":")[0] for problem in broken_links(page)] == ["#there", "missing.md"]
