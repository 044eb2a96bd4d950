"""Title lines from recorded text: slash commands by name, no markup, cut at a word."""

from stash_common.titles import shorten, title_line


def test_a_slash_command_is_titled_by_its_name() -> None:
    text = "<command-message>review</command-message>\n<command-name>/review</command-name>\n<command-args>12"

    assert title_line(text) == "/review"


def test_markup_and_list_marks_are_dropped_and_the_first_line_with_words_stands() -> None:
    assert (
        title_line("<system-reminder> </system-reminder>\n\n## - Fix the **login** page\nmore")
        == "Fix the **login** page"
    )


def test_a_codex_desktop_request_is_read_after_its_attached_files() -> None:
    text = "# Files mentioned by the user:\n## notes.md\n# My request for Codex:\nsummarise the notes"

    assert title_line(text) == "summarise the notes"


def test_long_text_is_cut_at_a_word_with_an_ellipsis_and_text_without_words_has_no_title() -> None:
    assert shorten("one two three four", 12) == "one two…"
    assert shorten("abcdefghijklmnop", 8) == "abcdefg…"
    assert title_line("<br>\n  \n") == ""
