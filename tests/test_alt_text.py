"""The website's alt text (notebooks/serieslib/alt_text.py): what each figure says it shows, in English and Chinese,
and the kernels that execute notebooks for commit putting it into each figure's output metadata."""

import sys

import matplotlib.pyplot as plt
import nbformat
import torch
from conftest import REPO

import helpers

sys.path.insert(0, str(REPO / "notebooks"))
from serieslib import alt_text, runs  # noqa: E402


def test_figures_carry_alt_text_of_what_they_draw():
    """A curve's shape and end values, a diagram's structure, a confusion matrix's diagonal, an image's size."""
    history = [{"val_loss": v, "val_acc": 1 - v / 3} for v in (2.3, 1.0, 0.5, 0.45, 0.44)]
    try:
        alt = alt_text.alt_text(helpers.plot_losses(history))
        assert "falls from 2.3 at epoch 0 to 0.44 at epoch 4, levelling off" in alt["en"], alt
        assert "从 epoch 0 时的 2.3 降到 epoch 4 时的 0.44，后半段趋于平缓" in alt["zh"], alt
        assert "rises from 0.233 at epoch 0" in alt_text.alt_text(helpers.plot_accuracies(history))["en"]
        network = alt_text.alt_text(helpers.draw_network([784, 32, 10]))
        assert "784 → 32 → 10" in network["en"] and "Linear(784, 32)" in network["en"]
        assert "784 → 32 → 10" in network["zh"]
        matrix = alt_text.alt_text(helpers.plot_confusion_matrix(torch.tensor([[50, 3], [9, 40]])))
        assert "holds 90 of the 102 images" in matrix["en"] and "9, true 1 predicted as 0" in matrix["en"], matrix
        fig = plt.figure()
        plt.imshow(torch.rand(28, 28).numpy(), cmap="gray")
        assert alt_text.alt_text(fig) == {"en": "a 28 × 28 greyscale image", "zh": "一张 28 × 28 的灰度图像"}
        relu = plt.figure()
        plt.plot(torch.linspace(-3, 3, 61), torch.relu(torch.linspace(-3, 3, 61)))
        assert "stays at 0 at x -3 until x 0, then rises to 3 at x 3" in alt_text.alt_text(relu)["en"]
    finally:
        plt.close("all")


def test_kernels_that_execute_for_commit_put_alt_text_in_the_metadata_and_a_plain_kernel_does_not():
    """The series' kernels load the formatter at start-up, leaving no name in the notebook; a learner's kernel has
    no such formatter."""
    from nbclient import NotebookClient

    code = (
        "import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt\nfig = plt.figure()\n"
        "plt.plot([0, 1, 2], [2, 1, 0.5])\ndisplay(fig)\nprint(sorted(n for n in dir() if 'alt' in n))"
    )
    for manager, carries in ((runs.kernel_manager(), True), (None, False)):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
        options = {"kernel_manager_class": manager} if manager else {}
        NotebookClient(nb, timeout=120, kernel_name="python3", **options).execute()
        figure, printed = nb.cells[0].outputs
        assert ("alt" in figure.metadata) is carries, figure.metadata
        assert printed.text == "[]\n"
        if carries:
            alt = figure.metadata["alt"]
            assert alt["en"].startswith("y against x;") and alt["en"].endswith("to 0.5 at x 2"), alt
            assert alt["zh"].startswith("y 随 x 的变化"), alt
