"""Notebook 08's checkpoint demo, executed in a kernel: it deletes no file it did not make."""

import copy
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))

from serieslib import pages, runs  # noqa: E402

DEMO = ["c08-03", "c08-07", "c08-09", "c08-11", "c08-13"]  # the data, then every cell that writes a checkpoint


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs)


def test_08_demo_keeps_every_file_it_did_not_make_and_starts_from_scratch_each_run(tmp_path):
    """work_dir set to a folder that already holds a learner's files (05's lesson.ckpt, a checkpoint named like the
    demo's, notes): they all survive; the demo, run twice in one session, interrupts and resumes both times."""
    from nbclient import NotebookClient

    work = tmp_path / "my runs"
    work.mkdir()
    theirs = {name: f"the learner's {name}".encode() for name in ("lesson.ckpt", "run.ckpt", "notes.txt")}
    for name, data in theirs.items():
        (work / name).write_bytes(data)
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    nb = load_notebook_node(str(REPO / "notebooks" / "08_checkpoints.ipynb"))  # as papermill -p sets its settings
    nb = parameterize_notebook(nb, {"device": "cpu", "progress": False, "work_dir": str(work)})
    cells = {cell.id: cell for cell in nb.cells}
    again = [copy.deepcopy(cells[i]) for i in DEMO[1:3]]  # Run All a second time, in the same session
    for cell in again:
        cell.id += "-again"
    setup = [pages.settings_cell(nb), *pages.tagged(nb, "injected-parameters"), *pages.tagged(nb, "setup")]
    nb.cells = setup + [cells[i] for i in DEMO] + again
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        extra_arguments=runs.KERNEL_ARGS,
        kernel_manager_class=runs.kernel_manager(),
        resources={"metadata": {"path": str(REPO / "notebooks")}},
    )
    client.execute()
    assert {p.name: p.read_bytes() for p in work.iterdir() if p.is_file()} == theirs, "the learner's files, untouched"
    for cell in (cells["c08-09"], nb.cells[-1]):
        assert "caught TrainingInterrupted: 2 completed epochs kept" in _text(cell), _text(cell)
    assert "same weights as the uninterrupted run: True" in _text(cells["c08-11"])
    assert [p for p in work.rglob("*.ckpt") if p.parent != work], "the demo's checkpoints, in a folder of its own"
