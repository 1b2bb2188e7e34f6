"""A campaign as JUnit XML (`junit.xml`): one test case per run, for the CI system that runs it nightly.

The schema is the one Jenkins, GitLab and GitHub test reporters read
(testsuites > testsuite > testcase, with <failure>, <error> or <skipped>).
The mapping follows the campaign's outcomes (sleuth.records.campaign.outcome):
pass and caught (an expected-invalid run found invalid) pass; invalid and
missed are failures carrying the anomaly summary; crashed and unknown are
errors (sleuth could not decide); runs an interruption left out are skipped.
A test case's time is the run's duration as the campaign page shows it
(`sleuth.records.measure`: first to last history event), carried by the campaign table.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from sleuth.records.campaign import run_key, verdict

KIND = {"invalid": "failure", "missed": "failure", "crashed": "error", "unknown": "error", "pending": "skipped"}


def write(campaign_dir: str, record: dict, verdicts: dict[str, dict]) -> str:
    """Write junit.xml for `record`, with `verdicts` (run_dir -> Spark's verdict) where there are some."""
    suite = ET.Element("testsuite", name=f"sleuth.campaign.matrix.{record['name']}",
                       timestamp=os.path.basename(os.path.normpath(campaign_dir)))
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    elapsed = 0.0
    for r in record["runs"]:
        run = r["run"]
        label, _ = verdict(r, verdicts)
        v = verdicts.get(run_key(r["run_dir"])) if r.get("run_dir") else None
        anomalies = v["anomaly_types"] if v else r.get("anomaly-types", [])
        # the run's duration as the campaign page shows it (sleuth.records.measure, through the table's row)
        seconds = ((v or {}).get("row") or {}).get("duration_s") or 0.0
        seconds = 0.0 if seconds != seconds else float(seconds)  # NaN: no timed event
        elapsed += seconds
        case = ET.SubElement(suite, "testcase", name=run["id"], classname=f"{record['name']}.{run['workload']}",
                             time=f"{seconds:.1f}")
        totals["tests"] += 1
        kind = KIND.get(label)
        if kind == "skipped":
            ET.SubElement(case, "skipped", message="not run: the campaign was interrupted (--resume runs it)")
        elif kind:
            ET.SubElement(case, kind, message=_message(label, run, anomalies, r), type=label).text = (
                "\n".join(_details(r)))
        totals[{"failure": "failures", "error": "errors", "skipped": "skipped"}.get(kind, "tests")] += bool(kind)
        if r.get("run_dir"):
            ET.SubElement(case, "system-out").text = f"run: {r['run_dir']}\nreport: {r['run_dir']}/index.html"
    for k, n in totals.items():
        suite.set(k, str(n))
    suite.set("time", f"{elapsed:.1f}")
    root = ET.Element("testsuites", name=f"sleuth campaign {record['name']}")
    root.append(suite)
    ET.indent(root)
    path = os.path.join(campaign_dir, "junit.xml")
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


def _message(label: str, run: dict, anomalies: list[str], r: dict) -> str:
    if label == "missed":
        return f"missed: fault switch {run['fault'] or '(none)'} on, expected invalid, found valid"
    if label == "invalid":
        return f"invalid: {', '.join(anomalies) or 'no anomaly named'}"
    if label == "crashed":
        return f"crashed: {r.get('crashed')}"
    return "unknown: the checkers could not decide"


def _details(r: dict) -> list[str]:
    out = [f"{k}: {r[k]}" for k in ("valid", "ops", "ok", "fail", "info") if k in r]
    return out + [f"anomalies: {', '.join(r.get('anomaly-types', []))}"]
