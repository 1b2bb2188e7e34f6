"""A campaign: a matrix of runs, run one by one and recorded, judged in-process or by Spark (`matrix`)."""
