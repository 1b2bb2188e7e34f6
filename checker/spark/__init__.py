"""sleuth.checker.spark — the Spark jobs: a campaign's runs consolidated, judged, audited, aggregated.

`jobs.judge_runs` is the entry point (its docstring is the API); `shard_history`
reads the storage nodes' Parquet back. pyspark is the `spark` extra and is
imported only inside these modules' functions, so importing the package is free.
"""
