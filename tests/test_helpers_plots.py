"""helpers.py, sections 7 and 8 (notebooks 06 and 07): plots, predictions and listings; evaluation in depth."""

import re

import matplotlib.figure
import pytest
import torch
from torch.utils.data import DataLoader, Subset, TensorDataset

import helpers

# ------------------------------------------------------------------------ plots, predictions and listings (notebook 06)


def test_show_batch_and_curves():
    dl = DataLoader(TensorDataset(torch.rand(40, 1, 28, 28), torch.zeros(40)), batch_size=32)
    fig = helpers.show_batch(dl)
    assert isinstance(fig, matplotlib.figure.Figure) and "32 images" in fig.axes[0].get_title()
    history = [{"val_loss": 2.3, "val_acc": 0.1}] + [{"val_loss": 0.5, "val_acc": 0.9, "train_loss": 0.6}] * 2
    losses = helpers.plot_losses(history)
    ax = losses.axes[0]
    assert ax.get_title() == "Loss vs. No. of epochs" and ax.get_xlabel() == "epoch" and ax.get_ylabel() == "loss"
    assert [line.get_label() for line in ax.lines] == ["training", "validation"]
    assert list(ax.lines[1].get_xdata()) == [0, 1, 2] and list(ax.lines[0].get_xdata()) == [1, 2]
    accs = helpers.plot_accuracies(history).axes[0]
    assert accs.get_title() == "Accuracy vs. No. of epochs" and [line.get_label() for line in accs.lines] == [
        "validation"
    ]
    with pytest.raises(ValueError, match="history is empty"):
        helpers.plot_losses([])


def test_draw_network_shows_each_layer_and_each_linear_layer():
    ax = helpers.draw_network([784, 32, 10]).axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert "Linear(784, 32)\nW [32, 784], b [32]" in texts and "Linear(32, 10)\nW [10, 32], b [10]" in texts
    assert "32 hidden, then ReLU" in texts and "784 inputs" in texts and "10 outputs" in texts
    assert [len(c.get_offsets()) for c in ax.collections] == [9, 9, 10], "a gap and dots stand for the rest"
    assert texts.count("\u22ee") == 2
    with pytest.raises(ValueError, match="two or more layer sizes"):
        helpers.draw_network([784])


def test_predict_image_shapes_and_mode(mnist_test):
    torch.manual_seed(0)
    model = helpers.MnistModel().train()
    image = mnist_test[0][0]
    p = helpers.predict_image(image, model)
    assert isinstance(p, int) and 0 <= p <= 9
    assert helpers.predict_image(image[0], model) == p
    assert model.training
    for shape in [(3, 28, 28), (1, 1, 28, 28), (784,), (1, 32, 32)]:
        with pytest.raises(ValueError, match=re.escape(f"[1, 28, 28] or [28, 28]; got {list(shape)}")):
            helpers.predict_image(torch.zeros(shape), model)


def test_show_source_prints_real_source(capsys):
    helpers.show_source(helpers.accuracy)
    assert "def accuracy(outputs" in capsys.readouterr().out


# ------------------------------------------------------------- evaluation in depth: where the model fails (notebook 07)


def test_confusion_matrix_and_per_class_accuracy():
    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    preds = torch.tensor([0, 1, 1, 1, 0, 2])
    cm = helpers.confusion_matrix(labels, preds, num_classes=3)
    assert cm.tolist() == [[1, 1, 0], [1, 2, 0], [0, 0, 1]]
    assert helpers.per_class_accuracy(cm).tolist() == pytest.approx([0.5, 2 / 3, 1.0])
    with pytest.raises(ValueError, match="0..2"):
        helpers.confusion_matrix(torch.tensor([3]), torch.tensor([0]), num_classes=3)
    with pytest.raises(ValueError, match="one length"):
        helpers.confusion_matrix(labels, preds[:2])


def test_predictions_mistakes_and_pictures(mnist_test):
    torch.manual_seed(0)
    model = helpers.MnistModel()
    subset = Subset(mnist_test, range(300))
    loader = helpers.DeviceResidentLoader.from_dataset(subset, 128, device="cpu")
    preds = helpers.predict_loader(model, loader)
    assert preds["labels"].tolist() == [mnist_test[i][1] for i in range(300)]
    assert preds["probs"].shape == (300, 10) and torch.allclose(preds["probs"].sum(1), torch.ones(300))
    assert torch.equal(preds["preds"], preds["probs"].argmax(1))
    worst = helpers.most_confident_mistakes(preds, k=5)
    conf = preds["probs"][worst, preds["preds"][worst]]
    assert len(worst) == 5 and (preds["preds"][worst] != preds["labels"][worst]).all()
    assert conf.tolist() == sorted(conf.tolist(), reverse=True)
    wrong = (preds["preds"] != preds["labels"]).nonzero().flatten()
    assert conf[0] == preds["probs"][wrong, preds["preds"][wrong]].max()
    cm = helpers.confusion_matrix(preds["labels"], preds["preds"])
    fig = helpers.plot_confusion_matrix(cm)
    assert isinstance(fig, matplotlib.figure.Figure)
    ax = fig.axes[0]
    assert ax.get_title() == "Confusion matrix" and ax.get_xlabel() == "predicted label" and len(ax.texts) == 100
    grid = helpers.show_mistakes(subset, preds, worst, title="The most confident mistakes")
    i = int(worst[0])
    assert grid.axes[0].get_title().startswith(f"{preds['labels'][i]} / {preds['preds'][i]}")
    assert grid._suptitle.get_text() == "The most confident mistakes: true / predicted (confidence)"
    with pytest.raises(ValueError, match="empty loader"):
        helpers.predict_loader(model, [])
    with pytest.raises(ValueError, match="no mistakes"):
        helpers.show_mistakes(subset, preds, [])
