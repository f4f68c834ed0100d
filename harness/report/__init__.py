"""``python -m harness report``: one sweep from MLflow -> report.md + report.html + frontier PNG.

Why: a sweep leaves one MLflow child run per job; comparing policies means reading them side
by side. The report reads ONLY the tracking store (any store with the harness's MLflow layout:
parent run tagged ``route_bench.role=sweep``, child runs tagged ``route_bench.role=job``, both
tagged ``route_bench.sweep_id``), so it works on a local SQLite store and on a team server.

Choices (docs/metrics.md is silent on reporting):
- One row per job config: if a config hash has several child runs (a failed attempt, then a
  finished rerun), the latest FINISHED run wins; if none finished, the latest run is shown with
  its status and blank metrics.
- "Best" per column: by the direction each protocol declares for its output (``Protocol.outputs``,
  ``harness.report.columns``): highest for hit/utility/diff/AUC columns, lowest for violation
  rates; cost and extra share are descriptive and never marked. A value shared by several jobs marks
  none of them (a tie decides no ranking). A mark is a position, not a verdict: the section
  "Policy vs policy" (``harness.protocols.sweep_comparisons``) says which differences the held-out
  questions can resolve.
- Metric names are read as the tracker logs them (``harness.tracking.naming.mlflow_name``:
  ``@`` -> ``_at_``, so ``heldout/hit@10`` is ``heldout/hit_at_10``) and shown with ``@``.
- Frontier plot: small multiples, one panel per policy, the leaders (highest mean deployable
  outcome) first; in each the policy's deployable frontier in colour, its exact frontier dashed,
  every other policy in grey behind it (ten curves on one axis merge into one mass). Points: the
  logged series ``frontier/<frontier>/<metric>`` (step = budget in %) against
  ``frontier/<frontier>/realized_usage`` at the same step; where a run lacks the series the
  scalar metrics ``budget/<rho>/<frontier>/...`` are used; for the exact frontier without a
  usage series, usage = budget (the exact frontier spends floor(rho * n) calls). Bands: +- the
  logged sd over splits (``budget/<rho>/<frontier>/<metric>_std``) where present; references:
  random and oracle at the exact frontier's usage (mean over jobs); fixed decisions
  (``budget/fixed/...``) as points, always_keep and always_extra each with its own marker
  (``harness.plots.FIXED_STYLES``); x from 0 to 1, y holding the references; one legend.
- ``--latest``: the sweep with the newest job run, within one experiment (that run's, or
  ``--experiment``'s); the report and stdout say which and why, and name the other experiments
  holding sweeps.
- Warnings (report and stdout): the base arm at ceiling on held-out (``heldout/base/<metric>``
  >= 0.999 in a job), and a held-out set that cannot resolve any hit difference vs always-base
  (``heldout/extra_vs_base/min_p`` > the job's ``protocol.alpha``).
- Layout (the first screen answers): title, three sentences (``harness.report.summary``: what
  was compared, the verdicts counted by kind, what to do next or what cannot be told), one line
  of context, the contents, then the verdicts (each sweep stage's ``lead``: protocol B's verdict
  per cost and budget) with the warnings; then one section per protocol that has a sweep stage
  (``Protocol.aggregate``, ``harness.protocols.sweep_stage``), recomputed from the jobs'
  artifacts, those with a lead first and open (B's decision table: one short table per budget,
  every column folded), then in the sweep's order, each folded under its heading (A's "Policy
  vs policy", C's gain comparison, a plugin protocol's table); the conclusions, folded; the
  frontiers; the per-job table last, folded (``<details>``); where the report came from.
- The sweep's end writes the same files on the sweep's parent run (``harness.report.parent_files``). The HTML has a small inline stylesheet (wide tables scroll sideways) and embeds
  the PNG as a data URI (one self-contained file to share); the Markdown links the PNG.
- ``--budget`` and / or ``--cost`` restrict the decision table to those values (the fixed
  decisions of the selected cost stay, as references) and print it to stdout, every column as
  ``key: value`` lines, one block per row (no line over 100 characters). A value the sweep
  does not have is one error line naming the flag and the values it has (exit 2), and nothing
  is written.
"""
