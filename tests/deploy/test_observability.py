#!/usr/bin/python3
"""Checks of deploy/grafana and deploy/prometheus (ctest label deploy): the Grafana
dashboard is provisioned against a Prometheus data source and has the rows of the five
measures, loss, throughput per node and the fault annotations; every PromQL expression
in it and in the alert rules names only metrics dseek exports (the table of
docs/metrics.md, which tests/unit/test_metrics_doc.cpp holds equal to what /metrics
serves) and parses with promtool.

    test_observability.py SOURCE_DIR
"""
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

SOURCE = (pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2]).resolve()
DASHBOARD = SOURCE / "deploy" / "grafana" / "dseek-dashboard.json"
ALERTS = SOURCE / "deploy" / "prometheus" / "alerts.yml"
PROMTOOL = shutil.which("promtool")

# PromQL words that are not metric names.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
            "or", "unless", "offset", "inf", "nan"}
PROMETHEUS_OWN = {"up"}  # series Prometheus itself writes for every target


def exported_metrics():
    """The metric names of docs/metrics.md's table (first column, `dseek_...`)."""
    names = set()
    for line in (SOURCE / "docs" / "metrics.md").read_text().splitlines():
        match = re.match(r"\|\s*`(dseek_[a-z_]+)`\s*\|", line)
        if match:
            names.add(match.group(1))
    assert len(names) >= 30, f"docs/metrics.md's table names only {len(names)} metrics"
    return names


def metric_names(expr):
    """The metric names an expression selects: identifiers that are not functions, label
    names in braces or groupings, strings, durations or keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)            # strings
    text = re.sub(r"\{[^}]*\}", "", text)                       # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)                      # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\b\d+(\.\d+)?([eE][+-]?\d+)?[smhdwy]?\b", "", text)  # numbers, durations
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        rest = text[match.end():].lstrip()
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue  # a function or an operator
        names.add(word)
    return names


def promql_exprs(dashboard):
    """(where, expression) of every PromQL expression in the dashboard."""
    found = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found.append((f"panel '{panel['title']}' target {target['refId']}", target["expr"]))
    for annotation in dashboard["annotations"]["list"]:
        if "expr" in annotation:
            found.append((f"annotation '{annotation['name']}'", annotation["expr"]))
    return found


def for_promtool(expr):
    """Grafana's variables replaced by what they stand for, so that promtool can parse."""
    return expr.replace("$__rate_interval", "1m").replace("$run", ".*")


def promtool_parse(exprs):
    """promtool check rules over a rule file with one recording rule per expression:
    returns (exit code, output)."""
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dseek_dashboard_expr_{i}", "expr": for_promtool(e)} for i, (_, e) in enumerate(exprs)]}]}
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "dashboard_rules.yml"
        path.write_text(yaml.safe_dump(rules))
        run = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True)
    return run.returncode, run.stdout + run.stderr


class Dashboard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dashboard = json.loads(DASHBOARD.read_text())
        cls.exported = exported_metrics()

    def test_datasource_is_a_prometheus_variable(self):
        variables = {v["name"]: v for v in self.dashboard["templating"]["list"]}
        self.assertEqual(variables["datasource"]["type"], "datasource")
        self.assertEqual(variables["datasource"]["query"], "prometheus")
        for panel in self.dashboard["panels"]:
            if panel["type"] == "row":
                continue
            self.assertEqual(panel["datasource"], {"type": "prometheus", "uid": "${datasource}"},
                             panel["title"])
            self.assertTrue(panel["targets"], f"panel '{panel['title']}' has no query")
        provisioned = yaml.safe_load((SOURCE / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
        self.assertEqual(provisioned["datasources"][0]["type"], "prometheus")

    def test_rows_of_the_five_measures_loss_and_throughput(self):
        rows = [p["title"] for p in self.dashboard["panels"] if p["type"] == "row"]
        for wanted in ["Compute utilization", "Communication", "Memory", "Convergence",
                       "Scaling efficiency and throughput"]:
            self.assertIn(wanted, rows)
        exprs = " ".join(e for _, e in promql_exprs(self.dashboard))
        for metric in ["dseek_mfu", "dseek_comm_share", "dseek_memory_fraction", "dseek_loss",
                       "dseek_validation_loss", "dseek_scaling_efficiency",
                       "dseek_tokens_per_second_per_node", "dseek_bubble_fraction"]:
            self.assertRegex(exprs, rf"\b{metric}\b")
        # Throughput per node: one line per node, so a straggler stands out.
        straggler = [p for p in self.dashboard["panels"] if p["title"].startswith("Tokens/s per node")]
        self.assertEqual(straggler[0]["targets"][0]["legendFormat"], "node {{node}}")

    def test_events_are_annotations(self):
        names = {a["name"]: a for a in self.dashboard["annotations"]["list"]}
        for event, counter in [("node lost", "dseek_nodes_lost_total"),
                               ("recovered", "dseek_recoveries_total"),
                               ("checkpoint", "dseek_checkpoints_written_total")]:
            self.assertIn(counter, names[event]["expr"])

    def test_every_expression_names_only_exported_metrics(self):
        exprs = promql_exprs(self.dashboard)
        self.assertGreater(len(exprs), 20)
        for where, expr in exprs:
            names = metric_names(expr)
            self.assertTrue(names, f"{where}: no metric in {expr!r}")
            unknown = names - self.exported - PROMETHEUS_OWN
            self.assertFalse(unknown, f"{where}: {expr!r} names {sorted(unknown)}, which dseek does not export")
        run_variable = [v for v in self.dashboard["templating"]["list"] if v["name"] == "run"][0]
        self.assertIn(re.search(r"label_values\((\w+),", run_variable["definition"]).group(1), self.exported)

    def test_the_name_check_catches_an_unknown_metric(self):
        self.assertEqual(metric_names('sum by (node) (rate(dseek_steps_total{run=~"$run"}[5m])) / on (node) dseek_typo'),
                         {"dseek_steps_total", "dseek_typo"})

    @unittest.skipIf(PROMTOOL is None, "promtool missing: scripts/install-deps.sh test installs prometheus")
    def test_every_expression_parses_with_promtool(self):
        code, output = promtool_parse(promql_exprs(self.dashboard))
        self.assertEqual(code, 0, output)
        code, output = promtool_parse([("broken", "rate(dseek_steps_total[5m]")])
        self.assertNotEqual(code, 0, "promtool accepted a broken expression")


class AlertRules(unittest.TestCase):
    def test_alerts_name_only_exported_metrics(self):
        exported = exported_metrics()
        rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
        names = {r["alert"] for r in rules}
        for wanted in ["DseekNodeLost", "DseekNodeUnreachable", "DseekTrainingStalled", "DseekLossNaN",
                       "DseekLossSpike", "DseekThroughputLow", "DseekMemoryHigh",
                       "DseekCommunicationShareHigh", "DseekRepeatedRecoveries", "DseekRepeatedRestarts"]:
            self.assertIn(wanted, names)
        for rule in rules:
            unknown = metric_names(rule["expr"]) - exported - PROMETHEUS_OWN
            self.assertFalse(unknown, f"{rule['alert']}: names {sorted(unknown)}")
        self.assertIn("stddev_over_time", [r for r in rules if r["alert"] == "DseekThroughputLow"][0]["expr"])

    def test_every_alert_has_a_promtool_unit_test(self):
        rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
        tests = yaml.safe_load((SOURCE / "tests/deploy/alerts_test.yml").read_text())["tests"]
        tested = {}
        for test in tests:
            for case in test["alert_rule_test"]:
                tested.setdefault(case["alertname"], set()).add(bool(case["exp_alerts"]))
        for rule in rules:
            self.assertEqual(tested.get(rule["alert"]), {True, False},
                             f"{rule['alert']}: needs a firing and a not-firing case")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
