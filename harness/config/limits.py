"""The bounds of the job config's counts: ``validate``, the sweep check and the console share them."""

# Upper bounds of every count a user sets: a typo'd zero too many ends in one line naming the
# key and the bound, not in minutes of work or an out-of-memory kill. The bootstrap's draw
# matrices are n_boot x documents (8 bytes each, a few alive at once): 20,000 draws over 7,405
# HotpotQA questions stay near a gigabyte each.
MAX_SEED = 2**32 - 1  # numpy's seed range
MAX_BOOTSTRAP = 20_000
MAX_FOLDS = 100  # protocol.n_folds, protocol.nested_folds, budget.cal_folds
MAX_REPEATS = 100  # protocol.repeats, budget.n_splits: each one a full pass of the protocol
MAX_GRID = 100  # budget.grid entries
MAX_MIN_DISCORDANT = 1_000_000
MAX_RETRIES = 100
MAX_SWEEP_JOBS = 10_000  # jobs of one sweep (each validated before any run starts)
MAX_WORKERS = 256  # hydra.launcher.n_jobs: parallel worker processes of a sweep

# Bounds of the job config's other numbers (docs/sweeps.md "Numbers"): every one finite, so no
# result can overflow to inf or NaN. cost.c is utility units per extra-arm call (an outcome is
# worth at most 1, so any c >= 1 already makes the extra arm never worth it); a derived c
# (cost.price x the measured cost per question) is held to the same bound.
MAX_COST = 1_000.0  # cost.c, cost.price and the derived c
MAX_GAIN_THRESHOLD = 1e6  # |protocol.gain_threshold|: a forced threshold on the policies' scores
MAX_ABS_NUMBER = 1e12  # |any other number| anywhere in the job config (dataset, arms, policy, plugins)

# limits.fit_s / limits.score_s: a plugin policy's call may take at most this long (seconds per
# call, null: no limit); the bound only catches a typo'd unit (a week)
MAX_CALL_SECONDS = 7 * 24 * 3600.0
