"""``python -m harness results``: ``docs/results.md``, generated from the logged runs of the named
experiments (``conf/experiment/seed*.yaml``), with the source papers' figures beside ours.

Why generated: a results page typed by hand drifts from the runs the day it is written. Every
number of ours on the page is *cited*: it comes from one logged metric of one run (or a ratio of
two, or a mean over named runs, or one cell of a run's CSV artifact), and the page's sidecar
``<page>.json`` lists, in page order, each number's text, where it comes from and how it was
formatted. ``tests/test_results_page.py`` regenerates a page from fresh runs and re-reads every
cited value from the tracking store itself (MLflow's client, not this package) to check each
number; the papers' figures come from ``harness.published``, each with the passage it quotes.

The page opens on a one-screen summary (``harness.results_summary``): each seed paper's finding
on each dataset, "reproduced" / "partly" / "not reproduced" by a rule applied to our logged
numbers (each experiment's spec declares its claims; the sidecar keeps each claim's rule and
inputs), the reasons and setting differences collapsed into lettered footnotes.

The page is data: one spec module per named experiment (``harness.results.experiments``: its
paper, title, tables, claims and differences), one renderer (``render``) that writes the page
from the specs, the citation model (``cite``), the store access (``sweeps``, through
``harness.tracking.store_reader``) and the command line (``cli``).
"""
