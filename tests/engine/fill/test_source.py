"""The one bracket walk every reader of a fill's structure shares (engine.fill.source)."""

from __future__ import annotations

from engine.fill.source import balanced, blanked, code_only, levels, opening, owed


def test_levels_gives_each_bracket_the_depth_outside_it_and_each_mark_its_own():
    code = "f(a, g(b, c)); x"
    walked = [(ch, depth) for _, ch, depth in levels(code, marks=",;")]
    assert walked == [("(", 0), (",", 1), ("(", 1), (",", 2), (")", 1), (")", 0), (";", 0)]


def test_levels_counts_below_zero_for_brackets_opened_before_its_start():
    code = "{ a; } b; } c"
    assert [(i, ch, d) for i, ch, d in levels(code, 1, brackets="{}", marks=";")] == [
        (3, ";", 0), (5, "}", -1), (8, ";", -1), (10, "}", -2)]
    # With stray closers not counted, the depth never goes below 0.
    assert [d for _, _, d in levels("} { }", brackets="{}", stray=False)] == [-1, 0, 0]


def test_levels_backwards_reads_from_the_end_with_closers_opening():
    code = "if (a[i] > (b)) {"
    walked = [(ch, depth) for _, ch, depth in levels(code, 0, len(code) - 2, brackets="()[]", backwards=True)]
    assert walked == [(")", 0), (")", 1), ("(", 1), ("]", 1), ("[", 1), ("(", 0)]
    # A long text is read from the end in windows: the walk that stops early reads little of it.
    long = "x;" * 100_000 + "(a)"
    assert next(levels(long, backwards=True)) == (len(long) - 1, ")", 0)


def test_opening_finds_the_bracket_a_closer_closes():
    head = "for (int i = f(0); i < n; i++)"
    assert opening(head, len(head) - 1) == head.index("(")
    assert opening("a)", 1) is None


def test_owed_and_balanced_check_the_kinds_in_order():
    assert owed("{ (", {"(": ")", "[": "]", "{": "}"}) == ("}", ")")
    assert owed("( ]", {"(": ")", "[": "]", "{": "}"}) is None
    assert balanced('f("(", a[0]) /* { */') and not balanced("f(a[0)]")


def test_comments_strings_and_directives_are_blanked():
    text = '#include <x>\nint a = 1; // c(\nchar *s = "{";'
    assert "{" not in code_only(text) and "#include" not in code_only(text)
    assert len(blanked(text)) == len(text) and blanked(text).index("int") == text.index("int")
