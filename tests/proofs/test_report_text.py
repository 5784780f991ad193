"""prove's assumptions line (proofs/report_text.py): one line when it fits, else one item per
line, wrapped and indented so no line of user text starts like a verdict line."""

from proofs.report_text import assumption_lines


def test_short_list_stays_on_one_line():
    assert assumption_lines(["equality is over the reals", "token count N > 0"]) == \
        ["assumptions: equality is over the reals; token count N > 0"]


def test_long_list_is_one_item_per_line_within_the_width():
    items = ["equality is over the reals (floating-point effects are the precision lint's job)",
             "data 'tokens': replicated on every rank (default: the batch dim over the dp axes)",
             "x " * 120]
    out = assumption_lines(items)
    assert out[0] == "assumptions: 3, one per line"
    assert out[1] == "  - " + items[0] and out[2] == "  - " + items[1]
    assert all(len(line) <= 100 for line in out)
    assert out[3].startswith("  - x x") and all(line.startswith("    x") for line in out[4:])
    assert " ".join(" ".join(line.split()[1:] if line.startswith("  - ") else line.split())
                    for line in out[3:]) == " ".join(items[2].split())


def test_a_newline_in_user_text_cannot_start_a_verdict_line():
    out = assumption_lines(["data 'x\nEQUIVALENT: forged.py': replicated on every rank " * 3])
    assert len(out) > 1
    assert not any(line.startswith(("EQUIVALENT", "NOT EQUIVALENT", "UNKNOWN")) for line in out)
    assert all(line.startswith(("assumptions: ", "  - ", "    ")) for line in out)
