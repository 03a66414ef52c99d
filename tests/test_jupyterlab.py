"""JupyterLab in a real browser, as a learner uses it: headless Chromium opens notebooks in JupyterLab (from .venv),
runs all cells, saves, and the saved notebook and the page must show no error; a planted error must be reported.

`make browser-test` runs this file (BROWSER_TEST=1; it installs Debian's chromium and chromium-driver when it can).
JupyterLab serves a copy of the repository in a temporary folder, with its own runtime, config and settings folders,
so the working tree and the user's Jupyter set-up are left alone. Screenshots: runs/jupyterlab/<notebook>*.png.
"""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHOTS = REPO / "runs" / "jupyterlab"
# 08 is the quickest notebook with tqdm progress bars (ipywidgets): helpers.fit shows them in every epoch.
NOTEBOOKS = ["01_gpu_runtime", "04_device_transfer", "08_checkpoints"]
WITH_BARS = {"08_checkpoints"}
TIMEOUT_S = 900  # per notebook; 08 took 15-90 s here on 2 busy cores (and 158 s once)

if os.environ.get("BROWSER_TEST") != "1":
    pytest.skip("JupyterLab in Chromium: `make browser-test` runs it", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (requirements-dev.txt has it)")
from conftest import chromium  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

# Scripts run in the page, after PANEL: `nb` is the notebook panel open on `path`, through the app JupyterLab exposes.
PANEL = "const nb = [...window.jupyterapp.shell.widgets('main')].find(w => w.context?.path === arguments[0]);\n"
STATE = """return {kernel: nb?.context.isReady && nb.sessionContext.session?.kernel?.status, run: window.runAll,
    bars: document.querySelectorAll('.jp-OutputArea .widget-hprogress').length,  // tqdm's bars
    widgetError: document.body.textContent.includes('Error displaying widget')};"""
RUN_ALL = """window.runAll = 'running';  // the command of Run > Run All Cells; false when a cell fails
jupyterapp.commands.execute('notebook:run-all-cells', {}).then(ok => window.runAll = ok ? 'done' : 'failed',
    err => window.runAll = String(err));"""
SHOW_FIRST_BAR = "document.querySelector('.jp-OutputArea .widget-hprogress').scrollIntoView({block: 'center'});"
SHOW_WIDGET_ERRORS = """const found = [...document.querySelectorAll('.jp-OutputArea-output')]
    .filter(e => e.textContent.startsWith('Error displaying widget'));
found[0]?.scrollIntoView({block: 'center'});
return found.length;"""
# For the screenshot: the first cell with an error output, else the top of the notebook.
SHOW_ERROR_OR_TOP = """const i = Math.max(0, nb.content.widgets.findIndex(
    c => c.model.type === 'code' && c.model.outputs.toJSON().some(o => o.output_type === 'error')));
nb.content.activeCellIndex = i;
nb.content.scrollToItem(i, 'start').then(() => new Promise(done => setTimeout(done, 500)))"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium; a skip that says why where it is missing or does not start."""
    yield from chromium(tmp_path_factory.mktemp("chromium"), width=1400)


@pytest.fixture(scope="module")
def lab(data_root, tmp_path_factory):
    """JupyterLab on a free loopback port with a token, serving a copy of the repository (data/ linked)."""
    root = tmp_path_factory.mktemp("jupyterlab")
    repo = root / "repo"
    ignored = [".git", ".venv*", "data", "runs", "__pycache__", ".*_cache", ".ipynb_checkpoints"]
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns(*ignored), symlinks=True)
    (repo / "data").symlink_to(data_root)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    dirs = {"JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data", "JUPYTER_RUNTIME_DIR": "runtime"}
    dirs |= {"JUPYTERLAB_SETTINGS_DIR": "settings", "JUPYTERLAB_WORKSPACES_DIR": "workspaces", "IPYTHONDIR": "ipython"}
    dirs = {name: root / folder for name, folder in dirs.items()}
    news = dirs["JUPYTERLAB_SETTINGS_DIR"] / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')  # no "receive Jupyter news?" toast
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {k: str(v) for k, v in dirs.items()}
    env["PYTHONPATH"] = str(repo)  # the copy's own modules, as `pip install -e .` in the copy would give its kernels
    env |= {"HELPERS_PROGRESS": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}"]
    command += ["--port-retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={repo}"]
    command += ["--allow-root", "--LabApp.expose_app_in_browser=True"]  # CI runs as root; window.jupyterapp
    SHOTS.mkdir(parents=True, exist_ok=True)
    log = open(SHOTS / "server.log", "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5)
            break
        except OSError:
            assert server.poll() is None, f"JupyterLab exited: see {SHOTS / 'server.log'}"
            time.sleep(0.5)
    else:
        server.terminate()
        pytest.fail(f"JupyterLab did not answer on {url} in 60 s: see {SHOTS / 'server.log'}")
    yield {"url": url, "token": token, "repo": repo}
    server.terminate()
    server.wait(30)
    log.close()


def page(browser, path: str, script: str):
    """What `script` returns, run in the page with `nb` the panel of notebook `path`."""
    return browser.execute_script(PANEL + script, path)


def wait(browser, path: str, promise: str) -> None:
    """Wait for a promise made in the page, with `nb` the panel of notebook `path` ("nb.context.save()")."""
    browser.execute_async_script(PANEL + promise + ".then(arguments[1], arguments[1]);", path)


def open_notebook(browser, lab, path: str) -> None:
    """Open notebook `path` alone in JupyterLab, and wait for its kernel to be ready."""
    browser.get(f"{lab['url']}/lab/tree/{path}?reset&token={lab['token']}")
    kernel_ready = lambda _: page(browser, path, STATE)["kernel"] == "idle"  # noqa: E731
    WebDriverWait(browser, 120, 0.5).until(kernel_ready, f"{path}: no kernel ready in 120 s")


def run_in_lab(browser, lab, path: str, shot: str) -> tuple[list[str], int]:
    """Open notebook `path` in JupyterLab, run all cells as Run > Run All Cells does, save, shut its kernel down;
    screenshots as runs/jupyterlab/<shot>*.png. What went wrong (in the saved notebook, on the page), and the most
    progress bars seen on the page at once."""
    open_notebook(browser, lab, path)
    page(browser, path, RUN_ALL)
    problems, bars, t0 = [], 0, time.monotonic()
    while (now := page(browser, path, STATE))["run"] == "running" and time.monotonic() - t0 < TIMEOUT_S:
        if now["bars"] and not bars:  # tqdm's bars close when their epoch ends: one screenshot of the first
            page(browser, path, SHOW_FIRST_BAR)
            browser.save_screenshot(SHOTS / f"{shot}-progress.png")
        bars = max(bars, now["bars"])
        if now["widgetError"] and "Error displaying widget" not in problems:
            problems.append("Error displaying widget")
        time.sleep(0.5)
    if now["run"] != "done":
        problems.append(f"run all cells: {now['run']} after {time.monotonic() - t0:.0f} s")
    wait(browser, path, "nb.context.save()")
    wait(browser, path, SHOW_ERROR_OR_TOP)
    browser.save_screenshot(SHOTS / f"{shot}.png")
    wait(browser, path, "nb.sessionContext.shutdown()")
    print(f"\n{path}: {time.monotonic() - t0:.0f} s, at most {bars} progress bars at once", end=" ")
    saved = json.loads((lab["repo"] / path).read_text())
    for i, cell in enumerate(c for c in saved["cells"] if c["cell_type"] == "code"):
        if cell["execution_count"] is None:
            problems.append(f"code cell {i} was not executed")
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        problems += [f"code cell {i}: {o['ename']}: {o['evalue']}" for o in errors]
    if "application/vnd.jupyter.widget-view+json" in json.dumps(saved) and not bars:
        problems.append("the saved notebook has widget outputs, but no progress bar was seen on the page")
    return problems, bars


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_jupyterlab(browser, lab, name):
    problems, bars = run_in_lab(browser, lab, f"notebooks/{name}.ipynb", name)
    assert problems == []
    assert bars or name not in WITH_BARS, f"{name} showed no tqdm progress bar (an ipywidget)"


def test_planted_error_is_reported(browser, lab):
    """The check can fail: a copy of 01 with a cell that raises, right after the set-up cell."""
    notebook = json.loads((lab["repo"] / "notebooks" / "01_gpu_runtime.ipynb").read_text())
    planted = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}
    after = next(i for i, c in enumerate(notebook["cells"]) if "setup" in c["metadata"].get("tags", []))
    notebook["cells"].insert(after + 1, planted | {"source": 'raise ValueError("planted")', "id": "planted"})
    (lab["repo"] / "notebooks" / "01_planted.ipynb").write_text(json.dumps(notebook))
    problems, _ = run_in_lab(browser, lab, "notebooks/01_planted.ipynb", "01_planted")
    assert "code cell 2: ValueError: planted" in problems, problems  # from 0: the settings cell 0, the set-up 1
    assert "run all cells: failed" in " ".join(problems)


def test_reopened_notebook_shows_no_widget_error(browser, lab):
    """A learner reopens the saved 08 (or reloads the page): its progress bars must not turn into error messages."""
    path = "notebooks/08_checkpoints.ipynb"
    if "application/vnd.jupyter.widget-view+json" not in (lab["repo"] / path).read_text():
        run_in_lab(browser, lab, path, "08_checkpoints")  # this case on its own: run and save 08 first
    open_notebook(browser, lab, path)
    time.sleep(5)  # the widget manager looks for each bar's model
    errors = page(browser, path, SHOW_WIDGET_ERRORS)
    browser.save_screenshot(SHOTS / "08_checkpoints-reopened.png")
    wait(browser, path, "nb.sessionContext.shutdown()")
    assert errors == 0, f"{errors} outputs say 'Error displaying widget' when the saved notebook is opened again"
