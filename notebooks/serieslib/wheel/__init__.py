"""The series' modules in a folder of their own, so pip never touches a `helpers` of yours: `import pytorch_gpu_mnist`
appends the folder to Python's path, after your own modules; then `import helpers` works."""

import sys
from pathlib import Path

_FOLDER = str(Path(__file__).resolve().parent)
if _FOLDER not in sys.path:
    sys.path.append(_FOLDER)
