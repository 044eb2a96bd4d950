"""Shell commands: their verb and the files they name, conservatively."""

from __future__ import annotations

import pytest

from stash_labeler.prm.commands import classify_command, command_text, patch_files


@pytest.mark.parametrize(
    ("command", "verb", "files"),
    [
        ("pytest", "test", ()),
        ("pytest tests/test_app.py::test_login -x -q", "test", ("tests/test_app.py",)),
        (".venv/bin/pytest -k 'login and not slow' tests/", "test", ()),
        ("cd repo && FOO=1 uv run pytest ./tests/test_a.py 2>&1 | tail -20", "test", ("tests/test_a.py",)),
        ("python3 -m pytest tests/unit", "test", ("tests/unit",)),
        ("python -m unittest discover", "test", ()),
        ("npm test -- --run src/x.test.ts -t 'Compaction Config'", "test", ("src/x.test.ts",)),
        ("npm run test:unit", "test", ()),
        ("yarn test", "test", ()),
        ("timeout 120 npx jest src/app.test.js", "test", ("src/app.test.js",)),
        ("go test ./...", "test", ()),
        ("cargo test --workspace", "test", ()),
        ("make test", "test", ()),
        (
            "mix test test/spotter_web/live/session_live_test.exs",
            "test",
            ("test/spotter_web/live/session_live_test.exs",),
        ),
        ("bundle exec rspec spec/models/user_spec.rb", "test", ("spec/models/user_spec.rb",)),
        ("./gradlew test", "test", ()),
        ("ruff check . && pytest", "test", ()),
        ("cat src/app.py", "read", ("src/app.py",)),
        ("sed -n '1,220p' /Users/u/SKILL.md", "read", ("/Users/u/SKILL.md",)),
        ("sed -n -e 5p notes.txt", "read", ("notes.txt",)),
        ("head -n 20 README.md && tail -5 CHANGELOG.md", "read", ("README.md", "CHANGELOG.md")),
        (r"wc -l /Users/u/Downloads/Demo\ Prep.vtt", "read", ("/Users/u/Downloads/Demo Prep.vtt",)),
        ("strings -n 8 bin/codemie | rg -i compact", "read", ("bin/codemie",)),
        ("git diff HEAD~1 src/app.py", "read", ()),
        ("rg -n 'compaction|compact' node_modules/@codemieai --hidden", "search", ()),
        ("grep -rn TODO src/", "search", ()),
        ("find . -name '*.py' | head", "search", ()),
        ("ls -la src", "search", ()),
        ("git grep -n needle", "search", ()),
        ("sed -i 's/old/new/' src/app.py", "edit", ("src/app.py",)),
        ("python script.py | head -5", "run", ()),
        ("mix phx.server", "run", ()),
        ("npm install", "run", ()),
        ("cat > notes.md <<'EOF'\npytest tests/a.py\nEOF", "read", ()),
        ("echo 'unbalanced", "run", ()),
        ("", "run", ()),
        ("cd /repo", "run", ()),
    ],
)
def test_classify_command(command: str, verb: str, files: tuple[str, ...]) -> None:
    assert classify_command(command) == (verb, files)


def test_file_candidates_exclude_globs_urls_variables_and_redirection_targets() -> None:
    command = "cat *.py https://x.io/a.txt $HOME/b.txt ../c.txt > out/d.txt"
    assert classify_command(command) == ("read", ("../c.txt",))


def test_an_apply_patch_body_is_an_edit_of_its_header_files() -> None:
    command = (
        "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n"
        "*** Add File: src/b.py\n+z\n*** Delete File: old.py\n*** End Patch\nPATCH"
    )
    assert classify_command(command) == ("edit", ("src/a.py", "src/b.py", "old.py"))


def test_patch_files_include_move_targets_once() -> None:
    patch = "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n*** Update File: a.py\n*** End Patch"
    assert patch_files(patch) == ("a.py", "b.py")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("pytest -q", "pytest -q"),
        (["bash", "-lc", "cd x && pytest"], "cd x && pytest"),
        (["/bin/zsh", "-c", "ls"], "ls"),
        (["rg", "-n", "two words", "src"], "rg -n 'two words' src"),
        (
            ["apply_patch", "*** Begin Patch\n*** Add File: a.py\n*** End Patch"],
            "apply_patch\n*** Begin Patch\n*** Add File: a.py\n*** End Patch",
        ),
        ([], None),
        (["ls", 3], None),
        (None, None),
        ({"cmd": "ls"}, None),
    ],
)
def test_command_text(value: object, text: str | None) -> None:
    assert command_text(value) == text
