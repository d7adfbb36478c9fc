"""The worker runtime: `serve` / `run_worker` and the loops behind them."""
