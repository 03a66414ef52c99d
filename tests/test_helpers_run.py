"""helpers_run.py: the lesson's run in one call, which checks what it was given before any work."""

import pytest

import helpers_run


def test_the_lessons_run_refuses_what_it_cannot_run_before_loading_data(tmp_path, monkeypatch):
    monkeypatch.setattr(helpers_run, "load_mnist", lambda *a, **k: pytest.fail("data loaded before the checks"))
    with pytest.raises(ValueError, match="give one learning rate per phase: 2 epoch counts but 1 learning rates"):
        helpers_run.train_lesson(tmp_path, "cpu", epochs=(1, 1), lrs=(0.5,))
    with pytest.raises(ValueError, match="lr .* must be a positive number"):
        helpers_run.train_lesson(tmp_path, "cpu", epochs=(1,), lrs=(-0.5,))


def test_the_lessons_run_trains_and_tests(data_root, capsys):
    result = helpers_run.train_lesson(data_root, "cpu", epochs=(1,), lrs=(0.5,), limit=1000)
    out = capsys.readouterr().out
    assert len(result["history"]) == 2 and "test: loss" in out and f"accuracy {result['test_acc']:.4f}" in out
    assert result["test_acc"] > result["history"][0]["val_acc"] + 0.1, "8 steps from chance: it learns"
