"""The notebook series' tooling, one module a job; notebooks/series.py is its command line. pages (the notebooks) is
the base the others build on; runs (prepare, run, refresh) uses exercises, pages, results and translation; data
(`make data`) stands alone."""
