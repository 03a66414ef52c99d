"""What every notebook of the series does first: its settings checked, the seed, the data, the device, the exercises.

After the settings cell (tagged `parameters`, for papermill's `-p NAME VALUE`), the set-up cell installs these modules
where missing and calls `start`; `python notebooks/series.py stamp` writes it from `NOTEBOOKS`:

    DEVICE, DATA, CHECKPOINT, (q1, q2, q3) = start("05_training", globals(), version="<version>")
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import helpers
import helpers_data
import helpers_exercises
from helpers_exercises import Said

DISTRIBUTION = "pytorch-gpu-mnist"
HERE = Path(__file__).resolve().parent


class Accepts(NamedTuple):
    """What one kind of setting accepts: the words a refusal shows, and the test."""

    words: Said
    ok: Callable[[Any], bool]


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def count_setting(low: int = 1, high: int | None = None, none: bool = False) -> Accepts:
    """A whole number from `low` to `high` (epochs, images, processes, ...), or None when `none`."""
    words = (
        Said("a whole number of at least {low}", low=low)
        if high is None
        else Said("a whole number of at least {low} and at most {high:,}", low=low, high=high)
    )
    return Accepts(
        Said("None, or {words}", words=words) if none else words,
        lambda v: (none and v is None) or (_is_whole(v) and v >= low and (high is None or v <= high)),
    )


AUTO = "auto"  # the device setting's choice of the best device here (None, its older spelling, still means it)
DEVICE_SETTING = Accepts(
    Said("'auto' (the best here), or a device name such as 'cpu', 'cuda', 'cuda:1' or 'mps'"),
    lambda v: v is None or (isinstance(v, str) and bool(v.strip())) or isinstance(v, helpers.torch.device),
)


def _seed_ok(value: Any) -> bool:
    """Whether `value` is a seed, as helpers.check_seed, the one check of a seed, says."""
    try:
        helpers.check_seed(value)
    except ValueError:
        return False
    return True


SEED_SETTING = Accepts(Said("a whole number from 0 to 2**63 - 1, such as 42"), _seed_ok)  # helpers.check_seed's words


PATH_SETTING = Accepts(
    Said(
        "None, or a path (a folder or a file) as {system} writes it, such as 'data'",
        system=platform.system() or Said("this system"),
    ),
    lambda v: v is None or (isinstance(v, (str, Path)) and helpers_data.is_plain_path(v)),
)
SWITCH_SETTING = Accepts(Said("None, True or False"), lambda v: v is None or isinstance(v, bool))
SIZES_SETTING = Accepts(
    Said("a list of sizes, whole numbers of at least 1, such as [128, 512]"),
    lambda v: isinstance(v, list) and bool(v) and all(_is_whole(n) and n >= 1 for n in v),
)
SEEDS_SETTING = Accepts(
    Said("None, or a list of seeds, such as [1, 2, 3]"),
    lambda v: v is None or (isinstance(v, list) and bool(v) and all(SEED_SETTING.ok(s) for s in v)),
)
IMAGES = count_setting(1, 50_000, none=True)  # a number of training images: the training split holds 50,000


def check_settings(namespace: dict[str, Any], accepts: dict[str, Accepts]) -> None:
    """Check each setting in `namespace` against what it accepts; a ValueError names the first wrong one."""
    if accepts and not any(name in namespace for name in accepts):
        raise ValueError(Said(
            "none of this notebook's settings ({names}) is defined: the settings cell, the first code "
            "cell, did not run (or was deleted). Run the notebook from the top; a notebook of the series that you "
            "saved elsewhere has it, as has the series' own copy", names=", ".join(accepts)))  # fmt: skip
    for name, (words, ok) in accepts.items():
        if name not in namespace:
            raise ValueError(Said(
                "the setting {name} is not defined: its line in the settings cell at the top is missing "
                "(deleted or commented out). Put it back, `{name} = ...` with the value you want, then run the "
                "notebook from the top", name=name))  # fmt: skip
        value = namespace[name]
        if isinstance(value, str) and value.strip().lower() in ("none", "null") and "None" in str(words):
            raise ValueError(Said(
                "the setting {name} is the text {value!r}, in quotes; for None write None without quotes. Change "
                "it in the settings cell at the top of the notebook (or pass -p {name} None to a headless run)",
                name=name, value=value))  # fmt: skip
        if not ok(value):
            if "list" in str(words):
                headless = Said("-y '{name}: [1, 2]' (papermill reads a list as YAML)", name=name)
            elif "path" in str(words) and isinstance(value, (int, float)):  # `-p data_root 2024` reads a number
                headless = Said("-r {name} {value} (-r passes its value as text; -p reads {value} as a number)",
                                name=name, value=value)  # fmt: skip
            else:
                headless = f"-p {name} VALUE"
            raise ValueError(Said(
                "the setting {name} must be {words}; it is {value}. Change it in the settings cell at the "
                "top of the notebook (or pass another to a headless run: {headless})",
                name=name, words=words, value=_shown(value), headless=headless))  # fmt: skip
    if "device" in accepts and namespace.get("device") not in (None, AUTO):
        helpers.as_device(namespace["device"], " (the setting device)")


def _shown(value: Any) -> str:
    """`value` as a message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Notebook(NamedTuple):
    """A notebook's settings and what `start` returns to it, in order (`stamp` writes its set-up cell from this)."""

    settings: dict[str, Accepts]
    returns: tuple[str, ...]  # from "DEVICE", "DATA", "CHECKPOINT", "WORK", and the exercises last
    checkpoint: str = "runs/lesson.ckpt"  # where CHECKPOINT is unless the setting `checkpoint` says otherwise
    saves_checkpoint: bool = False  # the notebook writes CHECKPOINT: checked writable before any training
    work: str = ""  # WORK's folder unless the setting `work_dir` says otherwise


COMMON = {"device": DEVICE_SETTING, "seed": SEED_SETTING}
WITH_DATA = COMMON | {"data_root": PATH_SETTING}

NOTEBOOKS = {
    "01_gpu_runtime": Notebook(
        COMMON | {"sizes": SIZES_SETTING, "repeats": count_setting(1)},
        ("DEVICE",),
    ),
    "02_data_loading": Notebook(
        WITH_DATA | {"exercise_limit": IMAGES},
        ("DEVICE", "DATA", "exercises"),
    ),
    "03_model": Notebook(WITH_DATA, ("DEVICE", "DATA", "exercises")),
    "04_device_transfer": Notebook(WITH_DATA, ("DEVICE", "DATA", "exercises")),
    "05_training": Notebook(
        WITH_DATA
        | {
            "checkpoint": PATH_SETTING,
            "progress": SWITCH_SETTING,
            "exercise_epochs": count_setting(1),
            "exercise_limit": IMAGES,
        },
        ("DEVICE", "DATA", "CHECKPOINT", "exercises"),
        saves_checkpoint=True,
    ),
    "06_plots": Notebook(
        WITH_DATA
        | {
            "hidden_size": count_setting(1),
            "checkpoint": PATH_SETTING,
            "progress": SWITCH_SETTING,
            "spread_seeds": SEEDS_SETTING,
            "exercise_epochs": count_setting(1),
        },
        ("DEVICE", "DATA", "CHECKPOINT", "WORK", "exercises"),
        work="runs/plots",  # where the lesson's torch.save writes: a folder of its own, not the learner's
    ),
    "07_error_analysis": Notebook(
        WITH_DATA | {"hidden_size": count_setting(1), "checkpoint": PATH_SETTING},
        ("DEVICE", "DATA", "CHECKPOINT", "exercises"),
    ),
    "08_checkpoints": Notebook(
        WITH_DATA | {"progress": SWITCH_SETTING, "work_dir": PATH_SETTING},
        ("DEVICE", "DATA", "WORK", "exercises"),
        work="runs/checkpoint-demo",
    ),
    "09_cpu_vs_gpu": Notebook(
        WITH_DATA
        | {
            "bench_epochs": count_setting(1),
            "bench_limit": IMAGES,
            "matmul_sizes": SIZES_SETTING,
            "profile_steps": count_setting(1),
            "exercise_epochs": count_setting(1),
            "work_dir": PATH_SETTING,
        },
        ("DEVICE", "DATA", "WORK", "exercises"),
        work="runs/profile",
    ),
    "10_many_gpus": Notebook(
        WITH_DATA
        | {
            "nprocs": count_setting(1, none=True),
            "bench_epochs": count_setting(1),
            "bench_limit": IMAGES,
            "work_dir": PATH_SETTING,
        },
        ("DATA", "WORK", "exercises"),
        work="runs/many_gpus",
    ),
    "11_gpu_speed": Notebook(
        WITH_DATA
        | {
            "bench_epochs": count_setting(2),
            "bench_limit": count_setting(1, 50_000),
            "wide_limit": IMAGES,
            "exercise_epochs": count_setting(1),
        },
        ("DEVICE", "DATA", "exercises"),
    ),
}


def is_clone(folder: Path) -> bool:
    """Whether `folder` is a copy of this repository (its modules with the notebooks' tools beside them)."""
    return (folder / "helpers.py").is_file() and (folder / "notebooks" / "series.py").is_file()


def series_folder() -> Path:
    """Where relative paths in the settings start: the repository these modules are in, else the working folder."""
    return HERE if is_clone(HERE) else Path.cwd()


def installed() -> tuple[str, str]:
    """The installed distribution's version and the repository it comes from (pip wrote both from pyproject.toml)."""
    metadata = importlib.metadata.metadata(DISTRIBUTION)
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL") or [])
    return metadata["Version"], urls.get("Repository", "")


def check_code(version: str | None) -> None:
    """Refuse code that is not the notebook's: a learner's own `helpers`, or another version installed."""
    if Path(helpers.__file__).resolve().parent != Path(__file__).resolve().parent:  # installed side by side
        raise ImportError(Said(
            "The `helpers` imported here is {mine}, a module of your own with the series' name, not the "
            "series' {series}. Rename yours (say, to my_helpers.py), restart the kernel, run again",
            mine=helpers.__file__, series=HERE / "helpers.py"))  # fmt: skip
    if version is not None and not is_clone(HERE) and (found := installed())[0] != version:
        raise RuntimeError(Said(
            "This notebook was written for version {version} of the series' code, and version {found} is "
            "installed here. Install its own: run `%pip install --no-deps --force-reinstall "
            "git+{url}@v{version}` in a cell, restart the kernel, run again",
            version=version, found=found[0], url=found[1]))  # fmt: skip


def _path(value: str | Path | None, default: str, folder: Path) -> Path:
    """A path setting as the learner meant it: `~` expanded, a relative one taken from the series' folder."""
    path = Path(value if value is not None else default).expanduser()
    return path if path.is_absolute() else folder / path


def _check_folder(path: Path, setting: str) -> None:
    """Refuse a folder setting that names a file (or a path through one), saying what to give instead."""
    file = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if file is not None:
        instead = (
            Said("the folder that holds it ({folder}), or another folder", folder=file.parent)
            if file == path
            else Said("another folder")
        )
        raise ValueError(Said(
            "the setting {setting} is a folder, and {file} is a file: give {instead}. Change it in the settings "
            "cell at the top of the notebook", setting=setting, file=file, instead=instead))  # fmt: skip


@helpers_exercises.speaking
def start(notebook: str, namespace: dict[str, Any], version: str | None = None, lang: str | None = None) -> tuple:
    """Check the settings in `namespace` (a notebook's globals), pick the device, seed, put MNIST in place.

    Returns the notebook's set-up names in NOTEBOOKS' order (DEVICE, DATA, CHECKPOINT or WORK, the exercises);
    `lang` ("en", "zh") is the language the exercises speak."""
    if notebook not in NOTEBOOKS:
        raise ValueError(f"{notebook!r} is not a notebook of the series; they are: {', '.join(NOTEBOOKS)}")
    spec = NOTEBOOKS[notebook]
    check_code(version)
    check_settings(namespace, spec.settings)
    folder = series_folder()
    given = {name: namespace.get(name) for name in spec.settings}
    device = helpers.get_default_device(given["device"])  # "auto" (or None): the best here
    helpers.seed_everything(given["seed"])
    made: dict[str, Any] = {"DEVICE": device}
    for name, default in (("data_root", "data"), ("work_dir", spec.work)):
        if name in given:
            _check_folder(_path(given[name], default, folder), name)
    if "data_root" in given:
        made["DATA"] = _path(given["data_root"], "data", folder)
        helpers_data.ensure_mnist(made["DATA"], setting="data_root")
    if "CHECKPOINT" in spec.returns:
        made["CHECKPOINT"] = _path(given.get("checkpoint"), spec.checkpoint, folder)
        if spec.saves_checkpoint:
            try:
                helpers.check_save_path(made["CHECKPOINT"])
            except (ValueError, OSError) as err:  # a file in the way, a read-only folder: said before any training
                raise ValueError(Said("the setting checkpoint: {err}. Change it in the settings cell at the top",
                                      err=err)) from None  # fmt: skip
    if "WORK" in spec.returns:
        made["WORK"] = _path(given.get("work_dir"), spec.work, folder)
        made["WORK"].mkdir(parents=True, exist_ok=True)
    line = helpers.describe_run(device)
    lines = {said_in: {"text/plain": helpers_exercises.heard(line, said_in)} for said_in in helpers_exercises.LANGUAGES}
    helpers_exercises.say(lines, lang or os.environ.get("SERIES_LANG") or "en")
    if "exercises" in spec.returns:
        made["exercises"] = tuple(helpers_exercises.exercises(notebook, namespace, lang))
    returned = tuple(made[name] for name in spec.returns)
    return returned[0] if len(returned) == 1 else returned


def setup_names(notebook: str) -> str:
    """The left side of a set-up cell's `start` line, e.g. 'DEVICE, DATA, (q1, q2)' (`stamp` writes it)."""
    spec = NOTEBOOKS[notebook]
    count = len(helpers_exercises.REGISTRY.get(notebook, []))
    names = [name for name in spec.returns if name != "exercises"]
    if "exercises" in spec.returns:
        qs = ", ".join(f"q{i}" for i in range(1, count + 1))
        names.append(f"[{qs}]" if count == 1 else f"({qs})")
    return ", ".join(names)
