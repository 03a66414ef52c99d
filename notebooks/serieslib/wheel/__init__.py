"""The series' modules, installed in one folder of their own: `import pytorch_gpu_mnist`, then `import helpers`.

Nothing of the series lies at the top of site-packages, so pip never replaces, nor its uninstall deletes, a module of
yours named `helpers`. Importing this package appends its folder to Python's path, after everything already there:
your own modules keep their names, and a notebook's set-up says so if one of them hides the series' (Colab, Kaggle).
"""

import sys
from pathlib import Path

_FOLDER = str(Path(__file__).resolve().parent)
if _FOLDER not in sys.path:
    sys.path.append(_FOLDER)
