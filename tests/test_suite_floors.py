"""The suite report's floors section (gen.bench.report.floors_markdown): every pair a peer
ran is judged against its floor, the pairs below are named with their ratios."""
from gen.bench import report


def _row(robot, algorithm, **ratios):
    return {"robot": robot, "algorithm": algorithm, "ratios": ratios}


def test_floors_name_the_pairs_below_and_count_the_others():
    rows = [_row("ur5", "nle", **{"pinocchio/specialized": 10.8, "adam/specialized": 1.59}),
            _row("icub", "crba", **{"pinocchio/specialized": 3.99, "adam/specialized": 8.2}),
            _row("icub", "aba", **{"pinocchio/specialized": 4.0}),              # ADAM has no aba here
            {"robot": "talos", "algorithm": "rnea", "error": "compile failed"}]
    text = "\n".join(report.floors_markdown(rows))
    assert "- Pinocchio / specialized >= 4: not met, 2 of 3 pairs at or above; below: icub crba 3.99" in text
    assert "- ADAM / specialized >= 2: not met, 1 of 2 pairs at or above; below: ur5 nle 1.59" in text


def test_floors_met_and_not_measured():
    text = "\n".join(report.floors_markdown([_row("ur5", "rnea", **{"pinocchio/specialized": 4.0})]))
    assert "- Pinocchio / specialized >= 4: met, 1 of 1 pairs at or above" in text
    assert "- ADAM / specialized >= 2: not measured, 0 of 0 pairs at or above" in text
