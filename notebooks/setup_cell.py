# @title Set-up: this notebook's settings and the series' code { display-mode: "form" }
import os
import sys
import urllib.request
import warnings
from pathlib import Path

VERSION = "$version"  # the version of the series' code this notebook belongs to (its git tag: v, then VERSION)
CACHE = Path(os.environ.get("SERIES_CACHE") or Path.home() / ".cache" / "$repo_name").expanduser() / VERSION
REPO = next((p for p in [Path.cwd(), *Path.cwd().parents] if (p / "notebooks/series.py").is_file()), CACHE)
if not (REPO / "helpers.py").is_file():  # Colab, Kaggle, a notebook on its own: fetch_series.py fetches VERSION
    URL = os.environ.get("SERIES_FETCH_URL", "https://raw.githubusercontent.com/$github/$branch/")
    try:
        exec(urllib.request.urlopen(URL + "notebooks/fetch_series.py", timeout=60).read(), fetched := {})
    except OSError as err:  # no internet: one message that says what to do, not urllib's traceback
        raise RuntimeError(f"Cannot download {URL}: {err}. Turn internet on (Kaggle: Settings > Internet)") from None
    except (SyntaxError, ValueError):  # not Python but a web page: a captive portal's login page, a proxy's notice
        raise RuntimeError(f"{URL} sent a web page, not Python: log in to the Wi-Fi, or check the connection") from None
    REPO = fetched["fetch_series"](CACHE, VERSION)
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore", message=".*pin_memory.*")  # the lesson's pin_memory=True without a GPU (notebook 02)
print(f"Series code v{VERSION} from {REPO if REPO == CACHE else 'the repository around this notebook'}")
import helpers
