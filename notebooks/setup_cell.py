# @title Set-up: import this series' `helpers`, fetching its code once if it is not here { display-mode: "form" }
import os, sys, urllib.request  # noqa: E401, I001
from pathlib import Path

CACHE = Path(os.environ.get("SERIES_CACHE") or Path.home() / ".cache" / "$repo_name")  # the fetched copy
REPO = next((p for p in [Path.cwd(), *Path.cwd().parents, CACHE] if (p / "notebooks/series.py").is_file()), None)
if REPO is None:  # Colab, Kaggle, a notebook on its own: fetch_series.py clones the code, or downloads a zip
    URL = os.environ.get("SERIES_FETCH_URL", "https://raw.githubusercontent.com/$github/$branch/")
    try:
        exec(urllib.request.urlopen(URL + "notebooks/fetch_series.py", timeout=60).read(), fetched := {})
    except OSError as err:  # no internet: one message that says what to do, not urllib's traceback
        raise RuntimeError(f"Cannot download {URL}: {err}. Turn internet on (Kaggle: Settings > Internet)") from None
    REPO = fetched["fetch_series"](CACHE)
sys.path.insert(0, str(REPO))
import helpers
