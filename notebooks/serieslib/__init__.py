"""The notebook series' tooling, one module a job; notebooks/series.py is its command line.

Each module imports only those above it:
    alt_text     the website's alt text, loaded into the kernels that execute notebooks for commit
    exercises    the worked solutions, folded in the notebooks: a proof cell after each (prepare)
    pages        the notebooks, their set-up cell, badge, links to the neighbours; `stamp`
    translation  the Chinese edition, built from the English notebooks and notebooks/zh/NN_name.md
    results      each notebook's key results: recorded at run time, read back, shown
    checks       what the commands refuse before they change anything
    runs         the series executed: prepared for nbval, run with papermill, refreshed in place
    data         make data: MNIST and Fashion-MNIST into data/ where torchvision's mirrors cannot be reached
"""
