"""The published settings a results page lists are those of its benchmarks."""

import sys

from metabench.analysis.references import load_references, references_for

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def test_a_halfcheetahvel_page_lists_only_halfcheetahvels_published_settings():
    from importlib import resources

    text = resources.files("metabench").joinpath("references.toml").read_text()
    entries = tomllib.loads(text)["reference"]
    expected = [(e["benchmark"], e["algorithm"], e["setting"]) for e in entries
                if e["benchmark"] == "HalfCheetahVel"]  # fmt: skip
    chosen = references_for(["HalfCheetahVel"])
    assert [(r.benchmark, r.algorithm, r.setting) for r in chosen] == expected
    assert expected and not any(r.benchmark.startswith("ML") for r in chosen)
    assert references_for([]) == []
    every = {r.benchmark for r in load_references()}
    assert references_for(every) == load_references()


def test_a_results_page_lists_the_published_settings_of_its_benchmarks_only(tmp_path):
    from metabench.analysis.tables import results_markdown
    from tests.factories import make_result

    def page(*benchmarks: str) -> str:
        runs = [
            (tmp_path / name / "result.json", make_result(name, "nop", 0, [[0.0, 1.0, -1.0]]))
            for name in benchmarks
        ]
        return results_markdown(tmp_path, runs, [])

    half_cheetah = page("HalfCheetahVel")
    assert "| HalfCheetahVel |" in half_cheetah and "| ML10 |" not in half_cheetah
    assert "| ML10 |" in page("HalfCheetahVel", "ML10")
    assert "## Published settings and numbers" not in page("Bandit")


def test_an_entry_named_by_a_glob_is_listed_for_every_benchmark_it_matches_and_no_other():
    glob = next(r for r in load_references() if r.benchmark == "AntDir-*")
    assert glob in references_for(["AntDir-oyster"]) and glob in references_for(["AntDir-varibad"])
    assert glob not in references_for(["AntGoal-oyster", "HalfCheetahDir-varibad"])
    point = next(r for r in load_references() if r.benchmark == "*PointRobot-*")
    assert point in references_for(["SparsePointRobot-oyster"])
    assert point in references_for(["PointRobot-varibad"])


def test_every_entry_names_or_matches_a_registered_benchmark():
    from metabench.harness.benchmarks import load_benchmarks

    names = set(load_benchmarks())
    unmatched = [r.benchmark for r in load_references() if not any(map(r.applies_to, names))]
    assert unmatched == []
