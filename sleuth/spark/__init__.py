"""sleuth.spark: the Spark jobs: a campaign's runs consolidated, judged, audited, aggregated.

`jobs.judge_runs` is the entry point (its docstring is the API); `session` starts
sleuth's Spark session; the durability audit, which reads the reference cluster's
storage files, lives beside the cluster's target (`sleuth.targets.reference_audit`). pyspark is the `spark` extra and is
imported only inside these modules' functions, so importing the package is free.
"""
