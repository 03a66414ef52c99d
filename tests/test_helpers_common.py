"""helpers_common.py, the timing the later modules share: configurations take turns, one call each a round, each
timed; the epochs' median and spread; a table says what its rows hold."""

import time

import helpers_common


def test_epoch_times_and_a_table_say_what_their_rows_hold():
    assert helpers_common.epoch_times([3.0, 1.0, 2.0, 10.0]) == {
        "epoch_s": 2.5,
        "epoch_s_min": 1.0,
        "epoch_s_max": 10.0,
    }
    table = helpers_common.markdown_table(
        [{"n": 1, "x": 0.5}, {"n": 2, "x": 0.25}], {"n": lambda r: str(r["n"]), "half": lambda r: f"{r['x']:.2f}"}
    )
    assert table.splitlines() == ["| n | half |", "|---|---|", "| 1 | 0.50 |", "| 2 | 0.25 |"]


def test_configurations_take_turns_one_epoch_each_and_each_call_is_timed():
    calls = []
    turns = {name: (lambda name=name: calls.append(name)) for name in "ABC"}
    seconds = helpers_common.take_turns(turns, 2)
    assert "".join(calls) == "ABCABC", "A B C A B C: a busy machine slows them all alike"
    assert list(seconds) == list("ABC") and all(len(s) == 2 and min(s) >= 0 for s in seconds.values())
    calls.clear()
    helpers_common.take_turns(turns, 3, alternate=True, before=lambda: calls.append("|"))
    assert "".join(calls) == "|C|B|A|A|B|C|C|B|A", "no fixed order; `before` ahead of each, untimed"
    assert helpers_common.take_turns({"nap": lambda: time.sleep(0.02)}, 1)["nap"][0] >= 0.02
